// CostModel: seconds of every piece of RL work on a simulated cluster, from the model's
// FLOPs and bytes (model_cost.h) against a device's roofline (device_preset.h). The
// formulas, stated once here and in docs/simulate.md (b = 2 bytes: bf16 weights, KV
// cache and activations; N = matmul parameters; W = N_all * b the weights' bytes):
//
// Rollout engine step of an instance of t devices (TP t), B decoding sequences whose
// contexts sum to C tokens, P prefill tokens whose causal pairs sum to Q:
//   flops   = 2 N (B + P) + A (C + Q)                 A = attention FLOPs per pair
//   bytes   = (W + K C) / t                           K = KV bytes per token
//   step    = step_overhead + token_overhead (B + P)
//             + max(flops / (t peak prefill_mfu), bytes / (bandwidth decode_eff))
//             + [t > 1] 2 L (latency + 2 (t-1)/t (B + P) h b / link)   (TP all-reduces)
// A decode segment of k steps at constant B has C growing by B per step: its time is
// the sum of the k step times, summed in closed form (a max of two lines).
//
// Trainer of dp x tp devices on T tokens with Q causal pairs:
//   forward = (2 N T + A Q) / (dp tp peak train_mfu) + forward_token_overhead T / dp
//   train   = ModelCost::train_flops / (dp tp peak train_mfu) + train_token_overhead T / dp
//             + [tp > 1] 4 L (latency + 2 (tp-1)/tp (T/dp) h b / link)
//             (full fine-tuning: 3 x the forward FLOPs; LoRA: ~2/3 of that, no weight
//             gradients of the base)
//   optimizer step = gradient all-reduce 2 (dp-1)/dp 4 N_train / tp / dp_link
//                    + AdamW 16 N_train / tp / bandwidth (fp32 master, grads, 2 moments)
//   N_train = N_all, or with LoRA the adapters' parameters alone
//   (dp_link: link inside a node, network when the trainers span nodes)
// Trainer state per training device (activations aside): 16 N_all / tp bytes (fp32
// weights = master, grads, AdamW's 2 moments); with LoRA 4 N_all / tp for the frozen
// fp32 base (no gradient, no optimizer state) + 16 N_adapters / tp.
// Weights to the rollout after an update, P = N_train b the published bytes (LoRA: the
// adapters only; instances hold the base and apply them unmerged):
//   disaggregated  every instance fetches P over the network from the trainers:
//                  max(P / (t network), instances P / (trainer devices network))
//   colocated      allgather-swap inside the node, the resharder's plan: rollout TP t
//                  dividing training TP (k = tp / t), each rank receives (k-1)/k of
//                  its shard, (k-1)/k P / (t link); t a multiple of tp, nothing moves
//   the trainers' TP gather (disaggregated, tp > 1): (tp-1)/tp P / link
//   delta sync (pipeline.weight_sync: delta): the fetch moves fetched_fraction x P (the
//   XOR-compressed delta; simulate.delta_fraction); the gather stays whole, and the
//   encoding's time is not modelled (a pass over P in memory, against P over the network)
// KV capacity of an instance: (t memory memory_utilization - W [- the training
// model's fp32 weights, adapters included, on those devices, colocated]) / K.
// Thread safety: immutable after construction.
#pragma once

#include <cstdint>

#include "aspen/sim/device_preset.h"
#include "aspen/sim/imports.h"
#include "aspen/sim/model_cost.h"
#include "aspen/util/error.h"

namespace aspen::sim {

struct ClusterShape {
  int train_dp = 1;
  int train_tp = 1;
  int instances = 1;
  int rollout_tp = 1;
  bool colocated = false;  // rollout and training share the devices (time-sliced)
  double memory_utilization = 0.9;
  // What an instance fetches per publish, over P (delta weight sync: < 1).
  double fetched_fraction = 1.0;

  int train_devices() const { return train_dp * train_tp; }
  int rollout_devices() const { return instances * rollout_tp; }
  int devices() const { return colocated ? train_devices() : train_devices() + rollout_devices(); }
};

// Per-token overheads of the trainer's passes beyond the roofline (the CPU calibration).
struct TrainerOverheads {
  double forward_token_s = 0;
  double train_token_s = 0;
  double update_fixed_s = 0;  // per optimizer step (and publish), any size
};

class CostModel {
 public:
  CostModel(ModelCost model, DevicePreset device, ClusterShape cluster,
            TrainerOverheads overheads = {});

  // One engine step (see above).
  double engine_step_s(int64_t decoding, double context, int64_t prefill_tokens,
                       double prefill_pairs) const;
  // k decode-only steps of B sequences whose contexts sum to C0 at the first step.
  double decode_steps_s(int64_t steps, int64_t decoding, double context0) const;
  // The most steps (<= max_steps) of such a segment that end within `seconds`.
  int64_t decode_steps_within(double seconds, int64_t decoding, double context0,
                              int64_t max_steps) const;
  int64_t kv_capacity_tokens() const;

  double forward_s(double tokens, double pairs) const;
  double train_s(double tokens, double pairs) const;
  double optimizer_step_s() const;
  double publish_s() const;       // trainer side, after an update
  double weight_fetch_s() const;  // an instance's load of the new weights
  double published_bytes() const { return published_bytes_; }  // P above
  double trainer_state_bytes() const;  // per training device (see above)

  const ModelCost& model() const { return model_; }
  const DevicePreset& device() const { return device_; }
  const ClusterShape& cluster() const { return cluster_; }

 private:
  double tp_collectives_s(int tp, double tokens, int collectives_per_layer) const;

  ModelCost model_;
  DevicePreset device_;
  ClusterShape cluster_;
  TrainerOverheads overheads_;
  double weight_bytes_ = 0;
  double published_bytes_ = 0;
  double kv_bytes_per_token_ = 0;
};

}  // namespace aspen::sim
