#include "aspen/sim/workload.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "aspen/pipeline/rollout_requests.h"
#include "aspen/sim/imports.h"
#include "aspen/util/error.h"

namespace aspen::sim {

void LengthModel::validate() const {
  check_input(median >= 1 && std::isfinite(median), "median " + std::to_string(median),
              "simulate.length_median", "a response length >= 1 token");
  check_input(sigma >= 0 && sigma <= 10, "sigma " + std::to_string(sigma),
              "simulate.length_sigma", "in [0, 10]");
  check_input(prompt_tokens >= 1, std::to_string(prompt_tokens), "simulate.prompt_tokens", ">= 1");
  check_input(max_tokens >= 1, std::to_string(max_tokens), "rollout.max_tokens", ">= 1");
}

std::vector<int64_t> LengthModel::group_lengths(int64_t group_id, int64_t n) const {
  if (replay && !replay->empty()) {
    const std::vector<int64_t>& recorded =
        (*replay)[static_cast<size_t>(group_id) % replay->size()];
    std::vector<int64_t> lengths(static_cast<size_t>(n));
    for (size_t j = 0; j < lengths.size(); ++j) {
      lengths[j] = std::clamp<int64_t>(recorded[j % recorded.size()], 1, max_tokens);
    }
    return lengths;
  }
  if (in_long_tail(long_tail_fraction, group_id)) {
    return std::vector<int64_t>(static_cast<size_t>(n), max_tokens);
  }
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(group_id));
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<int64_t> lengths(static_cast<size_t>(n));
  for (int64_t& length : lengths) {
    const double x = median * std::exp(sigma * normal(rng));
    length = std::clamp<int64_t>(std::llround(std::min(x, 1e15)), 1, max_tokens);
  }
  return lengths;
}

void ToolModel::validate() const {
  check_input(turns >= 1 && turns <= 1024, std::to_string(turns), "simulate.turns", "in [1, 1024]");
  check_input(std::isfinite(latency_median_s) && latency_median_s >= 0 && latency_median_s <= 3600,
              std::to_string(latency_median_s * 1e3) + " ms", "simulate.tool_latency_ms",
              "in [0, 3600000]");
  check_input(latency_sigma >= 0 && latency_sigma <= 10, std::to_string(latency_sigma),
              "simulate.tool_latency_sigma", "in [0, 10]");
  check_input(observation_tokens >= 0 && observation_tokens <= 1 << 20,
              std::to_string(observation_tokens), "simulate.observation_tokens", "in [0, 2^20]");
}

std::vector<int64_t> ToolModel::turn_ends(int64_t length) const {
  const int64_t count = std::max<int64_t>(1, std::min(turns, length));
  std::vector<int64_t> ends;
  for (int64_t t = 1; t <= count; ++t) ends.push_back(length * t / count);
  return ends;
}

double ToolModel::latency_s(int64_t group, int64_t sample, int64_t turn) const {
  if (latency_median_s <= 0) return 0.0;
  std::mt19937_64 rng(seed * 0xD1B54A32D192ED03ull + static_cast<uint64_t>(group) * 1000003ull +
                      static_cast<uint64_t>(sample) * 1009ull + static_cast<uint64_t>(turn));
  std::normal_distribution<double> normal(0.0, 1.0);
  return latency_median_s * std::exp(latency_sigma * normal(rng));
}

std::vector<std::vector<int64_t>> load_replay(const std::string& metrics_path) {
  std::ifstream in(metrics_path);
  check_input(in.good(), "cannot be read", "simulate.replay " + metrics_path,
              "a run's metrics.jsonl");
  std::vector<std::vector<int64_t>> groups;
  std::string text;
  for (int line = 1; std::getline(in, text); ++line) {
    if (text.empty()) continue;
    const std::string where = metrics_path + " line " + std::to_string(line);
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    check_input(!j.is_discarded() && j.is_object(), "is not a JSON object", where);
    if (!j.contains("response_lengths")) continue;  // e.g. an evaluation or SFT line
    const nlohmann::json& recorded = j.at("response_lengths");
    check_input(recorded.is_array(), "response_lengths is not an array", where);
    for (const nlohmann::json& group : recorded) {
      check_input(group.is_array() && !group.empty(),
                  "a group of response_lengths is not a non-empty array", where);
      std::vector<int64_t> lengths;
      for (const nlohmann::json& length : group) {
        check_input(length.is_number_integer() && length.get<int64_t>() >= 0,
                    "a response length is not a count of tokens", where);
        lengths.push_back(length.get<int64_t>());
      }
      groups.push_back(std::move(lengths));
    }
  }
  check_input(!groups.empty(), "no line records response_lengths",
              "simulate.replay " + metrics_path,
              "the metrics.jsonl of an aspen train run (this version records them)");
  return groups;
}

}  // namespace aspen::sim
