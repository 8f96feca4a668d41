#include "aspen/pipeline/prompt_source.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <sstream>

#include "aspen/pipeline/imports.h"
#include "aspen/util/error.h"

namespace aspen::pipeline {

PromptSource::PromptSource(int64_t num_examples, uint64_t seed)
    : num_examples_(num_examples), rng_(seed) {
  check_input(num_examples > 0, "no training examples", "data");
}

std::vector<PromptGroup> PromptSource::next(int64_t count) {
  std::vector<PromptGroup> picked;
  while (static_cast<int64_t>(picked.size()) < count) {
    if (cursor_ >= order_.size()) {
      order_.resize(static_cast<size_t>(num_examples_));
      std::iota(order_.begin(), order_.end(), 0);
      std::shuffle(order_.begin(), order_.end(), rng_);
      cursor_ = 0;
    }
    PromptGroup group{next_group_++, order_[cursor_++]};
    open_[group.group_id] = group.example;
    picked.push_back(group);
  }
  return picked;
}

int64_t PromptSource::example_of(int64_t group_id) const {
  const auto it = open_.find(group_id);
  check_input(it != open_.end(), "unknown or closed prompt group " + std::to_string(group_id),
              "prompt source");
  return it->second;
}

nlohmann::json PromptSource::state() const {
  std::ostringstream rng;
  rng << rng_;  // the standard text form of the engine state: exact round trip
  nlohmann::json open = nlohmann::json::array();
  for (const auto& [group, example] : open_) open.push_back({group, example});
  return {{"num_examples", num_examples_}, {"rng", rng.str()},     {"order", order_},
          {"cursor", cursor_},             {"next_group", next_group_}, {"open", open}};
}

void PromptSource::check_state(const nlohmann::json& state, const std::string& source) {
  const std::string where = "checkpoint prompt state";
  auto require = [&](bool ok, const std::string& problem) {
    check_input(ok, where + ": " + problem, source);
  };
  require(state.is_object(), "not an object");
  for (const char* key : {"num_examples", "rng", "order", "cursor", "next_group", "open"}) {
    require(state.contains(key), std::string("no \"") + key + "\"");
  }
  const nlohmann::json& examples = state["num_examples"];
  require(examples.is_number_integer() && examples.get<int64_t>() >= 1,
          "num_examples must be an integer >= 1");
  const int64_t num_examples = examples.get<int64_t>();
  require(state["rng"].is_string(), "rng is not a string");
  std::mt19937_64 rng;
  std::istringstream rng_text(state["rng"].get<std::string>());
  rng_text >> rng;
  require(!rng_text.fail(), "unreadable RNG state");
  const nlohmann::json& order = state["order"];
  require(order.is_array(), "order is not an array");
  require(order.empty() || static_cast<int64_t>(order.size()) == num_examples,
          "order has " + std::to_string(order.size()) + " entries for " +
              std::to_string(num_examples) + " examples");
  std::vector<bool> seen(order.size(), false);
  for (const nlohmann::json& entry : order) {
    const bool in_range = entry.is_number_integer() && entry.get<int64_t>() >= 0 &&
                          entry.get<int64_t>() < num_examples;
    require(in_range && !seen[static_cast<size_t>(entry.get<int64_t>())],
            "order is not a permutation of the examples (at " + entry.dump() + ")");
    seen[static_cast<size_t>(entry.get<int64_t>())] = true;
  }
  const nlohmann::json& cursor = state["cursor"];
  require(cursor.is_number_integer() && cursor.get<int64_t>() >= 0 &&
              cursor.get<int64_t>() <= static_cast<int64_t>(order.size()),
          "cursor must be an integer in [0, " + std::to_string(order.size()) + "]");
  const nlohmann::json& next_group = state["next_group"];
  require(next_group.is_number_integer() && next_group.get<int64_t>() >= 0,
          "next_group must be an integer >= 0");
  const nlohmann::json& open = state["open"];
  require(open.is_array(), "open is not an array");
  std::set<int64_t> groups;
  for (const nlohmann::json& entry : open) {
    const bool shaped = entry.is_array() && entry.size() == 2 && entry[0].is_number_integer() &&
                        entry[1].is_number_integer();
    require(shaped && entry[0].get<int64_t>() >= 0 &&
                entry[0].get<int64_t>() < next_group.get<int64_t>() &&
                entry[1].get<int64_t>() >= 0 && entry[1].get<int64_t>() < num_examples &&
                groups.insert(entry[0].get<int64_t>()).second,
            "open holds " + entry.dump() + ", not a distinct [group_id, example] in range");
  }
}

void PromptSource::restore(const nlohmann::json& state) {
  check_state(state, "checkpoint");
  check_input(state.at("num_examples").get<int64_t>() == num_examples_,
              "saved for " + state.at("num_examples").dump() + " training examples, the run has " +
                  std::to_string(num_examples_),
              "checkpoint prompt state");
  std::istringstream rng(state.at("rng").get<std::string>());
  rng >> rng_;
  order_ = state.at("order").get<std::vector<int64_t>>();
  cursor_ = state.at("cursor").get<size_t>();
  next_group_ = state.at("next_group").get<int64_t>();
  open_.clear();
  for (const auto& entry : state.at("open")) open_[entry.at(0)] = entry.at(1);
}

}  // namespace aspen::pipeline
