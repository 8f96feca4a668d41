#include "aspen/sim/trainer_layouts.h"

#include <algorithm>
#include <string>

#include "aspen/sim/cost_model.h"
#include "aspen/sim/imports.h"
#include "aspen/sim/simulation_spec.h"
#include "aspen/util/error.h"

namespace aspen::sim {
namespace {

// Far above any replica (Megatron's largest runs split a replica over a few hundred
// devices); keeps the enumeration of its divisors instant.
constexpr int kMaxReplicaDevices = 65536;
// Rows drawn to estimate a step's tokens and pairs: their means are stable long before.
constexpr int64_t kMaxDrawnRows = 65536;

// Why the model cannot be split tp x pp, or "" (model/tp_layout.h's rules for TP).
std::string refusal(const ModelConfig& model, int tp, int pp) {
  if (model.num_attention_heads % tp != 0) {
    return "tp does not divide num_attention_heads = " + std::to_string(model.num_attention_heads);
  }
  if (model.num_key_value_heads % tp != 0 && tp % model.num_key_value_heads != 0) {
    return "tp neither divides nor is a multiple of num_key_value_heads = " +
           std::to_string(model.num_key_value_heads);
  }
  if (model.intermediate_size % tp != 0) {
    return "tp does not divide intermediate_size = " + std::to_string(model.intermediate_size);
  }
  if (pp > model.num_hidden_layers) {
    return "pp exceeds the " + std::to_string(model.num_hidden_layers) + " layers";
  }
  return "";
}

struct StepWorkload {
  double tokens = 0;
  double pairs = 0;
};

// One optimizer step's trained tokens and causal pairs (see the header).
StepWorkload step_workload(const TrainConfig& config, const SimulationSpec& spec) {
  const int64_t rows = spec.prompts_per_iteration * spec.n;
  const int64_t mini = config.train.mini_batch_size;
  const int64_t step_rows = mini <= 0 || mini >= rows ? rows : mini;
  double tokens = 0, pairs = 0;
  int64_t drawn = 0;
  for (int64_t group = 0; group < spec.prompts_per_iteration && drawn < kMaxDrawnRows; ++group) {
    for (int64_t response : spec.lengths.group_lengths(group, spec.n)) {
      const int64_t calls = spec.tools.multi_turn()
                                ? static_cast<int64_t>(spec.tools.turn_ends(response).size()) - 1
                                : 0;
      const auto length = static_cast<double>(spec.lengths.prompt_tokens + response +
                                              calls * spec.tools.observation_tokens);
      tokens += length;
      pairs += causal_pairs(length);
      ++drawn;
    }
  }
  const double scale = static_cast<double>(step_rows) / static_cast<double>(drawn);
  return {tokens * scale, pairs * scale};
}

}  // namespace

nlohmann::json compare_trainer_layouts(const TrainConfig& config, int devices_per_replica) {
  check_input(devices_per_replica >= 1 && devices_per_replica <= kMaxReplicaDevices,
              "is " + std::to_string(devices_per_replica) + ", outside [1, " +
                  std::to_string(kMaxReplicaDevices) + "]",
              "--compare-pp", "the devices of one data-parallel replica, split tp x pp");
  const SimulationSpec spec = simulation_spec(config, config.pipeline.mode == PipelineMode::kAsync);
  const ModelConfig model = simulated_model(config);
  const int dp = config.placement.world_size() == 1 ? 1 : config.placement.train_dp;
  const StepWorkload step = step_workload(config, spec);
  nlohmann::json layouts = nlohmann::json::array(), skipped = nlohmann::json::array();
  nlohmann::json best;
  double best_s = 0;
  for (int tp = 1; tp <= devices_per_replica; ++tp) {
    if (devices_per_replica % tp != 0) continue;
    const int pp = devices_per_replica / tp;
    const std::string why = refusal(model, tp, pp);
    if (!why.empty()) {
      skipped.push_back({{"tp", tp}, {"pp", pp}, {"reason", why}});
      continue;
    }
    ClusterShape cluster;
    cluster.train_dp = dp;
    cluster.train_tp = tp;
    cluster.train_pp = pp;
    cluster.train_micro_batch_tokens = config.train.micro_batch_tokens;
    cluster.train_micro_batches = config.simulate.micro_batches;
    cluster.memory_utilization = config.simulate.memory_utilization;
    const CostModel costs(spec.model, spec.device, cluster, spec.overheads);
    const TrainerPassCost pass = costs.train_pass(step.tokens, step.pairs);
    const double state = costs.trainer_state_bytes();
    const bool fits = state <= spec.device.memory_bytes * cluster.memory_utilization;
    const nlohmann::json row = {{"tp", tp},
                                {"pp", pp},
                                {"micro_batches", pass.micro_batches},
                                {"bubble", pass.bubble},
                                {"step_s", pass.total_s()},
                                {"compute_s", pass.compute_s},
                                {"tp_comm_s", pass.tp_comm_s},
                                {"bubble_s", pass.bubble_s},
                                {"p2p_s", pass.p2p_s},
                                {"optimizer_s", costs.optimizer_step_s()},
                                {"state_gb_per_device", state / 1e9},
                                {"fits", fits}};
    const double seconds = pass.total_s() + costs.optimizer_step_s();
    if (fits && (best.is_null() || seconds < best_s)) {
      best = {{"tp", tp}, {"pp", pp}, {"step_s", pass.total_s()}, {"optimizer_s", costs.optimizer_step_s()}};
      best_s = seconds;
    }
    layouts.push_back(row);
  }
  return {{"devices_per_replica", devices_per_replica},
          {"dp", dp},
          {"model", model.model_type()},
          {"device", spec.device.name},
          {"tokens_per_step", step.tokens},
          {"micro_batch_tokens", config.train.micro_batch_tokens},
          {"layouts", layouts},
          {"skipped", skipped},
          {"best", best}};
}

}  // namespace aspen::sim
