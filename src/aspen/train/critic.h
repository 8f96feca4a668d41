// Critic (PPO value function): the policy's decoder plus a scalar value head, laid
// out as HF AutoModelForTokenClassification(num_labels=1) - the verl critic - so its
// state dict is "model.*" (as the policy) + "score.weight" [1, C] + "score.bias" [1].
//
// Values per response token: the value of the state before response token j is the
// head applied to the hidden state at position P + j - 1 (P = prompt length), the
// same position whose logits sample token j (MicroBatch::hidden_index).
//
// CriticTrainer::update: epochs x mini-batches x micro-batches like the actor, with
// algo::value_loss (clipped, 0.5 * aggregate) using the mini-batch's global
// denominators for exact gradient accumulation; one optimizer step per mini-batch.
// Batch columns read: values (rollout-time values, the clip anchor) and returns, and
// the loss_mask when present: the critic then trains on model-token positions only
// (compute_values still values every position; GAE reads only the model tokens').
// Data parallelism: as the actor's (actor.h, trainer_data_parallel.h) - given a group,
// update() takes this rank's local rows, mini_batch_size is global, denominators and
// gradients are summed over ranks and the metrics are global (identical on every rank).
// Pipeline parallelism (a critic built on a stage): as the actor's (pipeline_actor.h) -
// the last stage keeps the loop (values, value loss, metrics) over the pass's messages
// (train/pipeline_pass.h), the other stages run their 1F1B part; compute_values takes
// the forward-only pass and every stage returns the last stage's values; clipping uses
// the whole critic's norm (whole_model_norm.h); the metrics are the last stage's. With
// a DP group too (DP x PP), each stage's gradients are summed over its DP group after
// the step's backwards. Not done: the critic under TP or EP (it has neither).
//
// Shapes: T = packed tokens, C = hidden size, R = response tokens.
// Thread safety: not thread-safe; one trainer thread. Errors: aspen::Error for
// missing columns or malformed batches.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "aspen/algo/aggregate.h"
#include "aspen/model/qwen_model.h"
#include "aspen/train/imports.h"
#include "aspen/train/micro_batches.h"
#include "aspen/train/optimizer.h"
#include "aspen/train/precision.h"
#include "aspen/train/train_batch.h"
#include "aspen/train/trainer_data_parallel.h"
#include "aspen/train/trainer_options.h"

namespace aspen::train {

struct CriticModelImpl : torch::nn::Module {
  // With `pp` of size p > 1 the critic is one pipeline stage: its decoder holds the
  // stage's layers (model/qwen_model.h; the embedding on the first stage, never a tied
  // copy on the last), the value head only the last stage.
  explicit CriticModelImpl(const ModelConfig& config, const PipelineStages& pp = {});

  // Values [R] fp32 (fp64 for an fp64 model) at micro_batch.hidden_index. The whole
  // critic only (aspen::Error on a stage).
  torch::Tensor response_values(const MicroBatch& micro_batch, bool recompute);
  // The value head on the decoder's hidden states [T, C] of `micro_batch`: [R] as above.
  torch::Tensor score_values(const MicroBatch& micro_batch, const torch::Tensor& hidden);

  ModelConfig config;
  QwenModel model{nullptr};
  torch::nn::Linear score{nullptr};  // C -> 1, with bias; null on a stage but the last
};
TORCH_MODULE(CriticModel);

// A critic whose decoder starts from `policy`'s decoder weights and whose value head
// starts at zero (initial values 0: a neutral baseline, and no random projection of
// an untrained head to unlearn). A policy stage gives the critic's same stage.
CriticModel critic_from_policy(const QwenForCausalLM& policy);

struct CriticUpdateOptions {
  int64_t mini_batch_size = 0;  // rows per optimizer step; <= 0: the whole batch
  int64_t epochs = 1;
  bool shuffle = false;
  uint64_t seed = 0;
  double clip_range = 0.5;      // verl's cliprange_value default
  AggOptions agg;               // global denominators are set per mini-batch
};

struct CriticMetrics {
  double value_loss = 0.0;  // mean over steps of the mini-batch loss
  double clip_frac = 0.0;
  double grad_norm = 0.0;
  double lr = 0.0;
  int64_t steps = 0;
  int64_t skipped_steps = 0;
};

class CriticTrainer {
 public:
  // Trains `critic` (master weights) in place. With a data-parallel group this is a
  // collective (rank 0's weights are broadcast).
  CriticTrainer(CriticModel critic, const TrainerOptions& options,
                const DataParallelConfig& data_parallel = {});

  // Values [R] of every response token in batch order, no grad.
  torch::Tensor compute_values(const TrainBatch& batch);
  CriticMetrics update(const TrainBatch& batch, const CriticUpdateOptions& options);

  CriticModel& model() { return model_; }
  Optimizer& optimizer() { return optimizer_; }
  const TrainerDataParallel& data_parallel() const { return data_parallel_; }

 private:
  TrainerOptions options_;
  CriticModel model_;
  CriticModel compute_;
  MasterWeights master_;
  Optimizer optimizer_;
  TrainerDataParallel data_parallel_;  // after master_: hooks its tensors
};

}  // namespace aspen::train
