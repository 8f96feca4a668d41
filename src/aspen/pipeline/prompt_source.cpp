#include "aspen/pipeline/prompt_source.h"

#include <algorithm>
#include <numeric>
#include <sstream>

#include "aspen/util/error.h"

namespace aspen {

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

void PromptSource::restore(const nlohmann::json& state) {
  try {
    check_input(state.at("num_examples").get<int64_t>() == num_examples_,
                "saved for " + state.at("num_examples").dump() + " training examples, the run has " +
                    std::to_string(num_examples_),
                "checkpoint prompt state");
    std::istringstream rng(state.at("rng").get<std::string>());
    rng >> rng_;
    check_input(!rng.fail(), "unreadable RNG state", "checkpoint prompt state");
    order_ = state.at("order").get<std::vector<int64_t>>();
    cursor_ = state.at("cursor").get<size_t>();
    next_group_ = state.at("next_group").get<int64_t>();
    open_.clear();
    for (const auto& entry : state.at("open")) open_[entry.at(0)] = entry.at(1);
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("malformed: ") + e.what(), "checkpoint prompt state");
  }
}

}  // namespace aspen
