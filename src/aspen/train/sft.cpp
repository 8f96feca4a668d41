#include "aspen/train/sft.h"

#include <numeric>

#include "aspen/model/moe_routing.h"
#include "aspen/train/imports.h"
#include "aspen/train/micro_batches.h"
#include "aspen/train/mini_batches.h"
#include "aspen/train/model_copy.h"
#include "aspen/train/policy_logprobs.h"
#include "aspen/util/error.h"

namespace aspen::train {
namespace {

TrainBatch to_batch(const std::vector<SftExample>& examples) {
  TrainBatch batch;
  for (const auto& example : examples) {
    batch.prompts.push_back(example.prompt);
    batch.responses.push_back(example.answer);
  }
  batch.validate();
  return batch;
}

}  // namespace

SftTrainer::SftTrainer(QwenForCausalLM model, const TrainerOptions& options,
                       double router_aux_loss_coef)
    : options_(options),
      model_(model),
      compute_(compute_copy(model, options)),
      master_(trainable_params(*model_), trainable_params(*compute_)),
      optimizer_(master_.master(), options.optimizer),
      router_aux_loss_coef_(router_aux_loss_coef) {}

SftStepMetrics SftTrainer::step(const std::vector<SftExample>& examples) {
  const TrainBatch batch = to_batch(examples);
  std::vector<int64_t> rows(examples.size());
  std::iota(rows.begin(), rows.end(), 0);
  const torch::Device device = compute_->lm_head_weight().device();
  const auto micro_batches =
      make_micro_batches(batch, rows, options_.max_tokens_per_micro_batch, device);
  SftStepMetrics metrics;
  metrics.answer_tokens = batch.num_response_tokens();
  check_input(metrics.answer_tokens > 0, "batch has no answer tokens", "sft step");
  torch::Tensor nll_sum = torch::zeros({}, torch::kDouble);
  for (const auto& mb : micro_batches) {
    if (mb.num_response_tokens == 0) continue;
    const bool aux = router_aux_loss_coef_ != 0.0 && compute_->config.is_moe();
    MoeRoutingLog routing;
    TokenLogprobs lp =
        response_logprobs(compute_, mb, {}, options_.recompute, aux ? &routing : nullptr);
    torch::Tensor nll = -lp.logprobs.sum();
    torch::Tensor loss = nll / static_cast<double>(metrics.answer_tokens);
    if (aux) {
      const double share = static_cast<double>(mb.num_response_tokens) /
                           static_cast<double>(metrics.answer_tokens);
      loss = loss + router_aux_loss_coef_ * share *
                        load_balancing_loss(routing).to(loss.scalar_type());
    }
    loss.backward();
    master_.accumulate_grads();
    nll_sum += nll.detach().to(torch::kCPU, torch::kDouble);
  }
  const StepResult result = master_.step(optimizer_);
  metrics.step = ++steps_;
  metrics.nll = nll_sum.item<double>() / static_cast<double>(metrics.answer_tokens);
  metrics.grad_norm = result.grad_norm;
  metrics.lr = result.lr;
  metrics.skipped = result.skipped;
  return metrics;
}

double SftTrainer::evaluate_nll(const std::vector<SftExample>& examples) {
  const TrainBatch batch = to_batch(examples);
  const int64_t tokens = batch.num_response_tokens();
  check_input(tokens > 0, "examples have no answer tokens", "sft evaluate");
  torch::Tensor lp = batch_logprobs(compute_, batch, options_.max_tokens_per_micro_batch, {})
                         .logprobs;
  return -lp.sum().item<double>() / static_cast<double>(tokens);
}

std::vector<SftStepMetrics> run_sft(
    QwenForCausalLM model, const std::vector<SftExample>& examples, const SftOptions& options,
    const std::function<void(const SftStepMetrics&)>& callback) {
  check_input(options.epochs >= 1, "must be >= 1", "sft.epochs");
  check_input(options.batch_size >= 1, "must be >= 1", "sft.batch_size");
  SftTrainer trainer(model, options.trainer, options.router_aux_loss_coef);
  std::vector<SftStepMetrics> history;
  for (int64_t epoch = 0; epoch < options.epochs; ++epoch) {
    for (const auto& rows :
         mini_batch_rows(static_cast<int64_t>(examples.size()), options.batch_size,
                         /*shuffle=*/true, options.seed, epoch)) {
      std::vector<SftExample> chunk;
      chunk.reserve(rows.size());
      for (int64_t row : rows) chunk.push_back(examples[static_cast<size_t>(row)]);
      SftStepMetrics metrics = trainer.step(chunk);
      metrics.epoch = epoch;
      if (callback) callback(metrics);
      history.push_back(metrics);
    }
  }
  return history;
}

}  // namespace aspen::train
