#include "aspen/sim/cost_model.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "aspen/sim/imports.h"
#include "aspen/util/error.h"

namespace aspen::sim {
namespace {

constexpr double kElementBytes = 2.0;  // bf16

// sum_{j=0}^{k-1} max(a1 + b1 j, a2 + b2 j), in closed form.
double sum_of_max_lines(double k, double a1, double b1, double a2, double b2) {
  auto line_sum = [](double a, double b, double from, double to) {  // j in [from, to)
    const double n = to - from;
    if (n <= 0) return 0.0;
    return a * n + b * (from + to - 1.0) * n / 2.0;
  };
  if (k <= 0) return 0.0;
  // Where line 1 stops (or starts) being the larger one.
  if (b1 == b2) return a1 >= a2 ? line_sum(a1, b1, 0, k) : line_sum(a2, b2, 0, k);
  const double cross = std::clamp(std::ceil((a2 - a1) / (b1 - b2)), 0.0, k);
  if (b1 > b2) return line_sum(a2, b2, 0, cross) + line_sum(a1, b1, cross, k);
  return line_sum(a1, b1, 0, cross) + line_sum(a2, b2, cross, k);
}

}  // namespace

CostModel::CostModel(ModelCost model, DevicePreset device, ClusterShape cluster,
                     TrainerOverheads overheads)
    : model_(model), device_(std::move(device)), cluster_(cluster), overheads_(overheads) {
  check_input(cluster_.train_dp >= 1 && cluster_.train_tp >= 1 && cluster_.train_pp >= 1 &&
                  cluster_.instances >= 1 && cluster_.rollout_tp >= 1,
              "train " + std::to_string(cluster_.train_dp) + " x " +
                  std::to_string(cluster_.train_tp) + " x " + std::to_string(cluster_.train_pp) +
                  ", rollout " +
                  std::to_string(cluster_.instances) + " x " + std::to_string(cluster_.rollout_tp),
              "simulated placement", "every size >= 1");
  check_input(device_.peak_flops > 0 && device_.memory_bandwidth > 0 &&
                  device_.link_bandwidth > 0 && device_.network_bandwidth > 0 &&
                  device_.train_mfu > 0 && device_.prefill_mfu > 0 &&
                  device_.decode_bandwidth_efficiency > 0,
              "a non-positive peak, bandwidth or efficiency", "simulate.device " + device_.name,
              "every rate and efficiency must be > 0");
  check_input(cluster_.train_micro_batches >= 0 && cluster_.train_micro_batch_tokens >= 1,
              std::to_string(cluster_.train_micro_batches) + " micro-batches, " +
                  std::to_string(cluster_.train_micro_batch_tokens) + " tokens each",
              "simulated trainer", "a count >= 0 (0: from the token budget) and a budget >= 1");
  weight_bytes_ = model_.parameters * kElementBytes;
  published_bytes_ = model_.trainable_parameters() * kElementBytes;
  kv_bytes_per_token_ = model_.kv_elements_per_token * kElementBytes;
}

double CostModel::tp_collectives_s(int tp, double tokens, int collectives_per_layer) const {
  if (tp <= 1) return 0.0;
  const double bytes = 2.0 * (tp - 1) / tp * tokens * static_cast<double>(model_.hidden) * kElementBytes;
  // A TP group wider than a node all-reduces over the network.
  const double bandwidth =
      tp <= device_.devices_per_node ? device_.link_bandwidth : device_.network_bandwidth;
  return collectives_per_layer * static_cast<double>(model_.layers) *
         (device_.collective_latency_s + bytes / bandwidth);
}

TrainerPassCost CostModel::pass(double tokens, double flops, double overhead_s, int collectives,
                                int messages) const {
  const double dp = cluster_.train_dp, pp = cluster_.train_pp;
  const double rank_tokens = tokens / dp;
  TrainerPassCost cost;
  // Each stage computes L / pp of the layers for all of the rank's tokens.
  cost.compute_s = flops / (cluster_.train_devices() * device_.peak_flops * device_.train_mfu) +
                   overhead_s * tokens / dp / pp;
  cost.tp_comm_s = tp_collectives_s(cluster_.train_tp, rank_tokens, collectives) / pp;
  if (cluster_.train_pp == 1) return cost;
  const int64_t m =
      cluster_.train_micro_batches > 0
          ? cluster_.train_micro_batches
          : std::max<int64_t>(1, static_cast<int64_t>(std::ceil(
                                     rank_tokens / static_cast<double>(cluster_.train_micro_batch_tokens))));
  const double slots = static_cast<double>(m) + pp - 1.0;
  cost.micro_batches = m;
  cost.bubble = (pp - 1.0) / slots;
  cost.bubble_s = (cost.compute_s + cost.tp_comm_s) * (pp - 1.0) / static_cast<double>(m);
  const bool one_node = cluster_.train_tp * cluster_.train_pp <= device_.devices_per_node;
  const double bandwidth = one_node ? device_.link_bandwidth : device_.network_bandwidth;
  const double message_bytes =
      rank_tokens / static_cast<double>(m) * static_cast<double>(model_.hidden) * kElementBytes;
  cost.p2p_s = slots * messages * (device_.collective_latency_s + message_bytes / bandwidth);
  return cost;
}

double CostModel::engine_step_s(int64_t decoding, double context, int64_t prefill_tokens,
                                double prefill_pairs) const {
  const double t = cluster_.rollout_tp;
  const double tokens = static_cast<double>(decoding + prefill_tokens);
  const double flops = 2.0 * model_.matmul_parameters * tokens +
                       model_.attention_flops_per_pair * (context + prefill_pairs);
  const double bytes = (weight_bytes_ + kv_bytes_per_token_ * context) / t;
  const double roofline =
      !device_.roofline
          ? 0.0
          : std::max(flops / (t * device_.peak_flops * device_.prefill_mfu),
                     bytes / (device_.memory_bandwidth * device_.decode_bandwidth_efficiency));
  return device_.step_overhead_s + device_.token_overhead_s * tokens + roofline +
         tp_collectives_s(cluster_.rollout_tp, tokens, 2);
}

double CostModel::decode_steps_s(int64_t steps, int64_t decoding, double context0) const {
  if (steps <= 0) return 0.0;
  const double t = cluster_.rollout_tp;
  const auto b = static_cast<double>(decoding);
  const double peak = t * device_.peak_flops * device_.prefill_mfu;
  const double bandwidth = device_.memory_bandwidth * device_.decode_bandwidth_efficiency;
  // Step j: context C0 + B j.
  const double a_compute = (2.0 * model_.matmul_parameters * b +
                            model_.attention_flops_per_pair * context0) / peak;
  const double b_compute = model_.attention_flops_per_pair * b / peak;
  const double a_memory = (weight_bytes_ + kv_bytes_per_token_ * context0) / t / bandwidth;
  const double b_memory = kv_bytes_per_token_ * b / t / bandwidth;
  const auto k = static_cast<double>(steps);
  const double fixed = device_.step_overhead_s + device_.token_overhead_s * b +
                       tp_collectives_s(cluster_.rollout_tp, b, 2);
  if (!device_.roofline) return k * fixed;
  return k * fixed + sum_of_max_lines(k, a_compute, b_compute, a_memory, b_memory);
}

int64_t CostModel::decode_steps_within(double seconds, int64_t decoding, double context0,
                                       int64_t max_steps) const {
  int64_t low = 0, high = max_steps;  // decode_steps_s(low) <= seconds
  while (low < high) {
    const int64_t mid = low + (high - low + 1) / 2;
    if (decode_steps_s(mid, decoding, context0) <= seconds) {
      low = mid;
    } else {
      high = mid - 1;
    }
  }
  return low;
}

int64_t CostModel::kv_capacity_tokens() const {
  const double t = cluster_.rollout_tp;
  double free = t * device_.memory_bytes * cluster_.memory_utilization - weight_bytes_;
  if (cluster_.colocated) {
    free -= t * 4.0 * (model_.parameters + model_.adapter_parameters) /
            (cluster_.train_tp * cluster_.train_pp);
  }
  check_input(free > 0 && kv_bytes_per_token_ > 0,
              "the weights (" + std::to_string(weight_bytes_ / 1e9) + " GB) leave no KV cache on " +
                  std::to_string(cluster_.rollout_tp) + " x " + device_.name,
              "simulated rollout instance", "raise rollout.tp or simulate.memory_utilization");
  // Capped, because a double past 2^63 cast to int64 is undefined (simulate.memory_gb=1e300
  // once reported -9223372036854775808 tokens); 2^50 tokens is more than any cluster holds
  // and keeps every sum of token counts far from overflow.
  constexpr double kMaxKvTokens = static_cast<double>(int64_t{1} << 50);
  return static_cast<int64_t>(std::min(free / kv_bytes_per_token_, kMaxKvTokens));
}

TrainerPassCost CostModel::forward_pass(double tokens, double pairs) const {
  return pass(tokens, model_.forward_flops(tokens, pairs), overheads_.forward_token_s, 2, 1);
}

TrainerPassCost CostModel::train_pass(double tokens, double pairs) const {
  return pass(tokens, model_.train_flops(tokens, pairs), overheads_.train_token_s, 4, 2);
}

double CostModel::forward_s(double tokens, double pairs) const {
  // The calibrated cpu device: the measured per-token cost (one process, no pipeline).
  if (!device_.roofline) return overheads_.forward_token_s * tokens / cluster_.train_dp;
  return forward_pass(tokens, pairs).total_s();
}

double CostModel::train_s(double tokens, double pairs, int64_t steps) const {
  if (!device_.roofline) return overheads_.train_token_s * tokens / cluster_.train_dp;
  // One pass is linear in the tokens without a pipeline (as before pp existed: its
  // collectives' latency counted once per update); a pipeline flushes at every step.
  if (cluster_.train_pp == 1) return train_pass(tokens, pairs).total_s();
  const double k = static_cast<double>(std::max<int64_t>(1, steps));
  return k * train_pass(tokens / k, pairs / k).total_s();
}

double CostModel::optimizer_step_s() const {
  if (!device_.roofline) return overheads_.update_fixed_s;
  const double dp = cluster_.train_dp;
  const double shard = model_.trainable_parameters() / (cluster_.train_tp * cluster_.train_pp);
  const bool one_node = cluster_.train_devices() <= device_.devices_per_node;
  const double dp_bandwidth = one_node ? device_.link_bandwidth : device_.network_bandwidth;
  const double all_reduce =
      dp > 1 ? device_.collective_latency_s + 2.0 * (dp - 1) / dp * 4.0 * shard / dp_bandwidth : 0.0;
  return all_reduce + 16.0 * shard / device_.memory_bandwidth + overheads_.update_fixed_s;
}

double CostModel::publish_s() const {
  if (!device_.roofline) return 0.0;  // in the calibrated update_fixed_s
  if (cluster_.colocated) {
    // The resharder's plan (parallel/resharder.h): rollout TP dividing training TP
    // (k = train_tp / rollout_tp), each rank all-gathers the (k-1)/k of its inference
    // shard it lacks; rollout TP a multiple of training TP, each slices locally.
    // With pp > 1 a rank holds only its stage's layers of that shard (h / pp).
    const int t_train = cluster_.train_tp, t_infer = cluster_.rollout_tp;
    const double held = t_infer % t_train == 0 ? 1.0 : static_cast<double>(t_infer) / t_train;
    const double received = 1.0 - held / cluster_.train_pp;
    return received * published_bytes_ / t_infer / device_.link_bandwidth;
  }
  // Trainer ranks gather their tensor-parallel shards into whole tensors, each stage
  // its own layers.
  const double tp = cluster_.train_tp;
  return (tp - 1) / tp * published_bytes_ / cluster_.train_pp / device_.link_bandwidth;
}

double CostModel::weight_fetch_s() const {
  if (!device_.roofline) return 0.0;  // in-process: the instance takes the set itself
  if (cluster_.colocated) return 0.0;  // publish_s already placed the shards
  const double fetched = published_bytes_ * cluster_.fetched_fraction;
  const double one = fetched / (cluster_.rollout_tp * device_.network_bandwidth);
  const double egress = cluster_.instances * fetched /
                        (cluster_.train_devices() * device_.network_bandwidth);
  return std::max(one, egress);
}

double CostModel::trainer_state_bytes() const {
  const double tp = cluster_.train_tp * cluster_.train_pp;  // devices one replica spans
  if (!model_.lora()) return 16.0 * model_.parameters / tp;
  return (4.0 * model_.parameters + 16.0 * model_.adapter_parameters) / tp;
}

}  // namespace aspen::sim
