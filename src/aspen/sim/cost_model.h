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
// Trainer of dp x tp x pp devices (pp pipeline stages of L / pp layers each) on T
// tokens with Q causal pairs, per optimizer step (the pipeline flushes at each):
//   work    W = FLOPs / (dp tp pp peak train_mfu) + token_overhead T / dp / pp
//               + [tp > 1] c (L / pp) (latency + 2 (tp-1)/tp (T/dp) h b / tp_link)
//             FLOPs: forward 2 N T + A Q, c = 2; train ModelCost::train_flops, c = 4
//             (full fine-tuning: 3 x the forward FLOPs; LoRA: ~2/3 of that, no weight
//             gradients of the base)
//   pp = 1: the pass is W.
//   pp > 1: 1F1B over m micro-batches (m = simulate's fixed count, else
//             ceil((T/dp) / train.micro_batch_tokens), the trainer's own packing):
//             every stage runs m forwards and backwards in m + pp - 1 slots each way,
//             so the pass is W (m + pp - 1) / m, a bubble (pp-1)/(m+pp-1) of it, plus
//             the p2p messages on the critical path, one per slot and direction:
//             (m + pp - 1) k (latency + (T/dp/m) h b / pp_link), k = 2 training
//             (activations forward, their gradients back), 1 forward-only. Sends are
//             not overlapped with compute (Aspen's runner waits nothing but its
//             receives; a conservative bound for runners that overlap).
//   tp_link: link when tp <= devices_per_node, else network (TP across nodes);
//   pp_link: link when tp pp <= devices_per_node (a replica's stages in one node),
//   else network.
//   optimizer step = gradient all-reduce 2 (dp-1)/dp 4 N_train / (tp pp) / dp_link
//                    + AdamW 16 N_train / (tp pp) / bandwidth (fp32 master, grads, 2
//                    moments)
//   N_train = N_all, or with LoRA the adapters' parameters alone
//   (dp_link: link inside a node, network when the trainers span nodes)
// Trainer state per training device (activations aside): 16 N_all / (tp pp) bytes
// (fp32 weights = master, grads, AdamW's 2 moments; stages taken as equal, though the
// first holds the embedding and the last the head); with LoRA 4 N_all / (tp pp) for
// the frozen fp32 base (no gradient, no optimizer state) + 16 N_adapters / (tp pp).
// Weights to the rollout after an update, P = N_train b the published bytes (LoRA: the
// adapters only; instances hold the base and apply them unmerged):
//   disaggregated  every instance fetches P over the network from the trainers:
//                  max(P / (t network), instances P / (trainer devices network))
//   colocated      allgather-swap inside the node, the resharder's plan: rollout TP t
//                  dividing training TP (k = tp / t), each rank receives (k-1)/k of
//                  its shard, (k-1)/k P / (t link); t a multiple of tp, nothing moves
//   the trainers' TP gather (disaggregated, tp > 1): (tp-1)/tp P / pp / link (each
//                  stage gathers its own layers, the stages at once)
//   colocated with pp > 1: a rank holds only its stage's layers, h / pp of its
//                  inference shard (h = 1/k as above, or 1 when sliced locally), and
//                  receives the rest: (1 - h / pp) P / (t link)
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
  int train_pp = 1;  // pipeline stages of the trainer (1F1B), each on its own devices
  // Micro-batches per optimizer step under pp > 1: train_micro_batches when > 0, else
  // the DP rank's tokens over train_micro_batch_tokens, rounded up (the trainer's packing).
  int64_t train_micro_batches = 0;
  int64_t train_micro_batch_tokens = 4096;
  int instances = 1;
  int rollout_tp = 1;
  bool colocated = false;  // rollout and training share the devices (time-sliced)
  double memory_utilization = 0.9;
  // What an instance fetches per publish, over P (delta weight sync: < 1).
  double fetched_fraction = 1.0;

  int train_devices() const { return train_dp * train_tp * train_pp; }
  int rollout_devices() const { return instances * rollout_tp; }
  int devices() const { return colocated ? train_devices() : train_devices() + rollout_devices(); }
};

// Per-token overheads of the trainer's passes beyond the roofline (the CPU calibration).
struct TrainerOverheads {
  double forward_token_s = 0;
  double train_token_s = 0;
  double update_fixed_s = 0;  // per optimizer step (and publish), any size
};

// One trainer pass of one optimizer step, in parts (the formulas above).
struct TrainerPassCost {
  int64_t micro_batches = 1;  // m (1 without pp)
  double bubble = 0;          // (pp-1)/(m+pp-1)
  double compute_s = 0;       // W without its TP collectives
  double tp_comm_s = 0;       // W's TP collectives
  double bubble_s = 0;        // W (pp-1) / m
  double p2p_s = 0;           // the stages' messages
  double total_s() const { return compute_s + tp_comm_s + bubble_s + p2p_s; }
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

  // `steps` optimizer steps share the tokens and pairs equally; the pipeline flushes
  // at each (forward-only passes: one).
  double forward_s(double tokens, double pairs) const;
  double train_s(double tokens, double pairs, int64_t steps = 1) const;
  // One optimizer step's pass on `tokens` tokens (all DP ranks) with `pairs` pairs.
  TrainerPassCost forward_pass(double tokens, double pairs) const;
  TrainerPassCost train_pass(double tokens, double pairs) const;
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
  // A roofline pass: `flops` and per-token `overhead_s`, `collectives` TP collectives
  // per layer, `messages` p2p messages per pipeline slot.
  TrainerPassCost pass(double tokens, double flops, double overhead_s, int collectives,
                       int messages) const;

  ModelCost model_;
  DevicePreset device_;
  ClusterShape cluster_;
  TrainerOverheads overheads_;
  double weight_bytes_ = 0;
  double published_bytes_ = 0;
  double kv_bytes_per_token_ = 0;
};

}  // namespace aspen::sim
