// ActorTrainer: the policy worker's training side - old/proximal log-probs and the
// clipped policy-gradient update (PPO/GRPO/DAPO/GSPO via algo::policy_loss), with
// optional KL-in-loss against reference log-probs and an entropy bonus.
//
// update(batch): for each epoch, rows are cut into mini-batches (mini_batches.h);
// each mini-batch is packed into token-budgeted micro-batches (micro_batches.h) and
// every micro-batch's loss
//     pg_loss + kl_coef * kl_loss(logp, ref) - entropy_coef * entropy_loss
//             + router_aux_loss_coef * load_balancing_loss     (MoE models)
// is aggregated with the MINI-BATCH's token count / row count as the global
// denominators, so summing the micro-batch gradients (gradient accumulation)
// reproduces the whole mini-batch's gradient exactly, whatever the packing. One
// optimizer step per mini-batch (optimizer.h: clipping, schedule, skip on non-finite).
//
// Batch columns read (train_batch.h): advantages and old_logprobs always,
// ref_logprobs when kl_coef != 0, behaviour_logprobs when an off-policy correction is
// set. They are cast to the log-prob dtype.
// Loss mask (multi-turn trajectories): with a loss_mask column every loss, metric and
// denominator counts model tokens only (algo/packed.h): the mini-batch's token count
// is its model tokens over every rank, micro-batch metric weights are their model
// tokens, the rollout mismatch compares model tokens only, and an environment
// token's columns (old/ref/rollout log-probs, advantages) never reach a gradient.
//
// Precision: the model passed in holds the master weights and is what a resharder
// publishes; with compute_dtype bf16 a bf16 copy does forward/backward
// (precision.h), and compute_logprobs() uses that copy too, so old log-probs come
// from the same numerics as the update's ratio.
//
// Metrics: means over the update's optimizer steps of the mini-batch values (losses
// as optimised; clip_frac / approx_kl / entropy token-weighted over the mini-batch).
//
// Data parallelism (ActorOptions::data_parallel.group set; trainer_data_parallel.h):
// update(batch) takes this rank's LOCAL rows - its share of the global batch, e.g. from
// a dock claim with balance_ranks = d or split_balanced() (pipeline/dp_shares.h).
// mini_batch_size stays GLOBAL (rows per optimizer step over all ranks): the step count
// comes from the all-reduced row count and each rank trains its proportional share of
// every mini-batch (dp_mini_batches.h). Denominators (tokens, rows) are all-reduced per
// mini-batch, gradients summed over ranks in buckets (overlapped with the last
// micro-batch's backward for fp32 compute) before clipping and the step, and the
// metrics are global: every rank returns the same ActorMetrics, tokens and
// micro_batches summed over ranks. The result equals one process training on the
// union of the ranks' rows, mini-batch by mini-batch, up to fp32 summation order.
// Every rank must call update() (and construct the trainer) together, also with no
// local rows. compute_logprobs() is local (no collectives). Without a group the
// trainer is exactly the single-rank one.
// Tensor parallelism: `model` may be a TP model (model->tp enabled); every TP rank then
// calls the same methods on the same rows. Log-probs use the vocab-parallel head, the
// recompute path the vocab-parallel embedding, and clipping the norm of the FULL model
// (optimizer.h ShardedNorm: each shard counted once, replicas by their copy count), so
// a TP update equals the TP = 1 update shard for shard (tests/parallel/tp_actor_test.cpp).
// Thread safety: not thread-safe; one trainer thread. Errors: aspen::Error for missing
// columns or malformed batches.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "aspen/algo/kl.h"
#include "aspen/algo/policy_loss.h"
#include "aspen/kernels/logprob_head.h"
#include "aspen/model/qwen_model.h"
#include "aspen/train/imports.h"
#include "aspen/train/micro_batches.h"
#include "aspen/train/optimizer.h"
#include "aspen/train/precision.h"
#include "aspen/train/train_batch.h"
#include "aspen/train/trainer_data_parallel.h"
#include "aspen/train/trainer_options.h"

namespace aspen::train {

struct ActorOptions {
  TrainerOptions trainer;
  LogprobHeadOptions head;           // temperature (must match rollout's) and vocab chunk size
  DataParallelConfig data_parallel;  // no group: single-rank (see above)
};

struct ActorUpdateOptions {
  int64_t mini_batch_size = 0;  // rows per optimizer step; <= 0: the whole batch
  int64_t epochs = 1;           // passes over the batch (PPO epochs)
  bool shuffle = false;         // reshuffle rows each epoch (seed + epoch)
  uint64_t seed = 0;
  PolicyLossOptions policy;  // agg.global_tokens/global_seqs are set per mini-batch
  double kl_coef = 0.0;      // KL-in-loss coefficient (GRPO); 0 disables
  KlEstimator kl_estimator = KlEstimator::kK3;
  double entropy_coef = 0.0;  // entropy bonus; 0 disables its gradient (still reported)
  // MoE load-balancing loss (model/moe_routing.h, transformers' formula) per
  // micro-batch forward, weighted by the micro-batch's share of the mini-batch in the
  // policy aggregation's unit (response tokens for token-mean, rows for the seq-mean
  // modes), so accumulation over micro-batches and ranks gives that weighted mean.
  // 0 disables its gradient (still reported for a MoE model); no effect on a dense one.
  // Being a product of per-forward sums (as transformers and Megatron compute it), it
  // is the one term that depends on how rows are packed into micro-batches and ranks.
  double router_aux_loss_coef = 0.0;
  // The old (proximal) log-probs are the current weights' own: taken, detached, from
  // this update's forward pass instead of the old_logprobs column. Exact only for a
  // single optimizer step (one epoch, one mini-batch), where the proximal policy of
  // decoupled PPO is the current policy - it saves the recompute pass. aspen::Error
  // when the update would take more than one step.
  bool proximal_is_current = false;
  // MoE routing replay (R3, algorithm.rollout_correction.routing_replay): the update's
  // forwards route response positions to the batch's behaviour_routed_experts
  // (train/policy_logprobs.h, routing_replay_log); the gradient reaches the gate
  // through the replayed experts' probabilities. The load-balancing loss counts the
  // replayed assignments with the router's own probabilities.
  bool routing_replay = false;
};

struct ActorMetrics {
  double policy_loss = 0.0;
  double kl_loss = 0.0;
  double router_aux_loss = 0.0;  // MoE load-balancing loss (0 for a dense model)
  // MoE expert load: per sparse layer, the busiest expert's share of the top-k slots
  // over the mean share (1: perfectly balanced; E/k: every token on the same k
  // experts), counted over every forward of the update (all ranks); the worst layer
  // and the mean over layers. 0 for a dense model.
  double router_load_max = 0.0;
  double router_load_mean = 0.0;
  // MoE training/inference routing mismatch, when the batch carries the rollout's
  // expert choices (behaviour_routed_experts): the share of (response token, sparse
  // layer) pairs where the trainer's top-k set differs from the rollout's, over the
  // tokens of the first optimizer step (as rollout_logprob_diff_*). 0 otherwise.
  double router_topk_mismatch = 0.0;
  int64_t router_topk_compared = 0;  // (token, layer) pairs behind it
  double entropy = 0.0;
  double clip_frac = 0.0;
  double approx_kl = 0.0;  // k3 estimate of KL(old || new), token mean
  double grad_norm = 0.0;  // pre-clip, mean over steps that were taken
  double lr = 0.0;         // of the last step taken
  int64_t steps = 0;
  int64_t skipped_steps = 0;
  int64_t tokens = 0;  // packed tokens processed (prompt + response) over all epochs
  int64_t micro_batches = 0;
  // Training/inference mismatch, when the batch carries the rollout's log-probs
  // (behaviour_logprobs): |trainer log-prob - rollout log-prob| per response token,
  // over the tokens of the update's FIRST optimizer step, from the weights before it
  // (every part of a streamed update). For rows generated by the trained version (all
  // rows in sync mode) this is pure numerics: different kernels, batching and dtypes
  // for the same policy; for stale rows it adds the policy's drift since then.
  double rollout_logprob_diff_mean = 0.0;
  double rollout_logprob_diff_max = 0.0;
  int64_t rollout_logprob_diff_tokens = 0;
  // Share of response tokens whose importance weight to the rollout policy the
  // off-policy correction truncated (tis) or dropped (decoupled); 0 without one.
  double correction_capped_frac = 0.0;
  // algorithm.rollout_correction (algo/rollout_correction.h): token means over every
  // step, as clip_frac; all 0 without it. The IS weight after truncation, the token
  // ratio proximal/rollout before it, the shares truncated and rejected, and the k3
  // estimate of KL(rollout || proximal).
  double rollout_is_mean = 0.0;
  double rollout_is_ratio_mean = 0.0;
  // The token ratio's extremes over every step and rank (0 without the correction).
  double rollout_is_ratio_max = 0.0;
  double rollout_is_ratio_min = 0.0;
  double rollout_is_truncated_frac = 0.0;
  double rollout_rs_masked_frac = 0.0;
  double rollout_corr_kl = 0.0;
};

class ActorTrainer {
 public:
  // Trains `model` (fp32 master weights) in place. With a data-parallel group this is a
  // collective (rank 0's weights are broadcast).
  ActorTrainer(QwenForCausalLM model, const ActorOptions& options);

  // Log-probs (+ entropy) of every response token, [R] in batch order, no grad.
  // With `routing_replay`, the forwards replay the batch's behaviour_routed_experts.
  TokenLogprobs compute_logprobs(const TrainBatch& batch, bool with_entropy = false,
                                 bool routing_replay = false);

  ActorMetrics update(const TrainBatch& batch, const ActorUpdateOptions& options);

  // Streaming: the batch arrives in parts (the async pipeline trains prompt groups as
  // they complete instead of waiting for the whole batch: the sorting bubble).
  // accumulate(part) runs the part's forward/backward with every loss aggregated as a
  // SUM (unit denominators) into the accumulated gradients; step_accumulated() divides
  // them by the whole batch's denominator (its response tokens for token-mean, its
  // rows for the seq-mean modes) and takes the one optimizer step. Because each
  // aggregation is linear in its denominator, this equals update() on the union of the
  // parts up to summation order (tested). Only for a single step (epochs 1, no
  // mini-batches) on one data-parallel rank: aspen::Error otherwise. The weights do not
  // change between the parts, so proximal_is_current stays exact. With nothing
  // accumulated, step_accumulated() takes no step.
  void accumulate(const TrainBatch& part, const ActorUpdateOptions& options);
  ActorMetrics step_accumulated(const ActorUpdateOptions& options);

  QwenForCausalLM& model() { return model_; }
  QwenForCausalLM& compute_model() { return compute_; }
  Optimizer& optimizer() { return optimizer_; }
  const TrainerDataParallel& data_parallel() const { return data_parallel_; }

 private:
  ActorOptions options_;
  QwenForCausalLM model_;
  QwenForCausalLM compute_;
  MasterWeights master_;
  Optimizer optimizer_;
  TrainerDataParallel data_parallel_;  // after master_: hooks its tensors

  // Sums of metric terms over micro-batches, each already weighted so that the sum is
  // the value over everything they cover.
  struct MetricSums {
    torch::Tensor policy_loss, kl_loss, router_aux_loss, entropy, clip_frac, approx_kl, capped;
    torch::Tensor mismatch_sum, mismatch_max;  // of |trainer - rollout| log-probs
    torch::Tensor expert_load;                 // [sparse layers, E] top-k slots per expert
    torch::Tensor rollout_corr;  // [5]: the rollout_* metrics of ActorMetrics, in order
    torch::Tensor rollout_ratio_max, rollout_ratio_min;  // extremes of the token ratio
    int64_t routing_differ = 0, routing_compared = 0;  // (token, layer) top-k sets
    int64_t mismatch_tokens = 0;
    void add(torch::Tensor& slot, const torch::Tensor& value);
  };
  // Forward/backward of each micro-batch with `policy`'s aggregation; metric terms are
  // weighted by response tokens / metric_tokens. The data-parallel reducer is armed
  // before micro-batch `last_backward` (none when it is out of range). With
  // `measure_mismatch` the rollout log-prob differences go into `sums`.
  void backward_micro_batches(const std::vector<MicroBatch>& micro_batches,
                              const PolicyLossOptions& policy, const ActorUpdateOptions& options,
                              double metric_tokens, size_t last_backward, bool measure_mismatch,
                              ActorMetrics& metrics, MetricSums& sums);

  // What accumulate() has gathered since the last step_accumulated().
  ActorMetrics streamed_metrics_;
  MetricSums streamed_sums_;
  int64_t streamed_tokens_ = 0;
  int64_t streamed_rows_ = 0;
};

}  // namespace aspen::train
