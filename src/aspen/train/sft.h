// Supervised fine-tuning on (prompt, answer) pairs: loss = mean negative
// log-likelihood of the answer tokens only (prompt tokens are context, never
// targets), over packed micro-batches, with the shared optimizer/schedule/precision.
//
// SftTrainer::step(examples) is one optimizer step on one batch: the micro-batch
// losses are sum(nll) / (answer tokens of the whole batch), so gradient accumulation
// equals the full-batch mean. run_sft() loops epochs over the examples, reshuffled per
// epoch with a seeded RNG (mini_batches.h), calling `callback` after every step.
//
// Shapes: prompt and answer are host token ids; a prompt must be non-empty (its last
// token predicts the first answer token).
// Thread safety: not thread-safe; one trainer thread. Errors: aspen::Error for an
// empty prompt, out-of-range ids or invalid options.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "aspen/kernels/logprob_head.h"
#include "aspen/model/qwen_model.h"
#include "aspen/train/imports.h"
#include "aspen/train/optimizer.h"
#include "aspen/train/precision.h"
#include "aspen/train/trainer_options.h"

namespace aspen::train {

struct SftExample {
  std::vector<int64_t> prompt;
  std::vector<int64_t> answer;
};

struct SftOptions {
  int64_t epochs = 1;
  int64_t batch_size = 8;  // examples per optimizer step
  uint64_t seed = 0;       // shuffle seed (epoch e uses seed + e)
  TrainerOptions trainer;  // optimizer.lr etc.
  double router_aux_loss_coef = 0.0;  // MoE load-balancing loss (SftTrainer); 0: off
};

struct SftStepMetrics {
  int64_t step = 0;   // optimizer steps attempted so far, this one included
  int64_t epoch = 0;
  double nll = 0.0;   // mean NLL per answer token of this batch, before the update
  int64_t answer_tokens = 0;
  double grad_norm = 0.0;
  double lr = 0.0;
  bool skipped = false;
};

class SftTrainer {
 public:
  // Trains `model` (master weights) in place.
  // router_aux_loss_coef: a MoE model's load-balancing loss (model/moe_routing.h) per
  // micro-batch, weighted by its share of the batch's answer tokens; 0: off.
  SftTrainer(QwenForCausalLM model, const TrainerOptions& options,
             double router_aux_loss_coef = 0.0);

  SftStepMetrics step(const std::vector<SftExample>& examples);
  // Mean answer-token NLL of `examples` under the current weights, no grad.
  double evaluate_nll(const std::vector<SftExample>& examples);

  QwenForCausalLM& model() { return model_; }
  Optimizer& optimizer() { return optimizer_; }

 private:
  TrainerOptions options_;
  QwenForCausalLM model_;
  QwenForCausalLM compute_;
  MasterWeights master_;
  Optimizer optimizer_;
  int64_t steps_ = 0;
  double router_aux_loss_coef_ = 0.0;
};

// Returns every step's metrics. `model` is trained in place.
std::vector<SftStepMetrics> run_sft(
    QwenForCausalLM model, const std::vector<SftExample>& examples, const SftOptions& options,
    const std::function<void(const SftStepMetrics&)>& callback = {});

}  // namespace aspen::train
