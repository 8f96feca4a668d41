#include "aspen/train/critic.h"

#include <numeric>

#include "aspen/algo/packed.h"
#include "aspen/algo/value_loss.h"
#include "aspen/train/imports.h"
#include "aspen/train/model_copy.h"
#include "aspen/train/recompute.h"
#include "aspen/util/error.h"
#include "aspen/train/update_steps.h"

namespace aspen::train {
namespace {

CriticModel make_compute_critic(const CriticModel& master, const TrainerOptions& options) {
  options.validate();
  if (param_dtype(*master) == options.compute_dtype) return master;
  CriticModel copy(master->config);
  copy->to(master->score->weight.device(), options.compute_dtype);
  return copy;  // MasterWeights copies the master's values in
}

}  // namespace

CriticModelImpl::CriticModelImpl(const ModelConfig& config) : config(config) {
  config.validate("critic config");
  model = register_module("model", QwenModel(config));
  score = register_module("score", torch::nn::Linear(config.hidden_size, 1));
}

torch::Tensor CriticModelImpl::response_values(const MicroBatch& micro_batch, bool recompute) {
  torch::Tensor hidden =
      decoder_hidden(*model, micro_batch.input_ids, micro_batch.cu_seqlens, recompute);
  torch::Tensor values = score(hidden.index_select(0, micro_batch.hidden_index)).squeeze(-1);
  return values.scalar_type() == torch::kDouble ? values : values.to(torch::kFloat);
}

CriticModel critic_from_policy(const QwenForCausalLM& policy) {
  CriticModel critic(policy->config);
  critic->to(policy->lm_head_weight().device(), policy->lm_head_weight().scalar_type());
  torch::NoGradGuard no_grad;
  const auto source = policy->model->named_parameters(/*recurse=*/true);
  for (auto& item : critic->model->named_parameters(/*recurse=*/true)) {
    item.value().copy_(source[item.key()]);
  }
  critic->score->weight.zero_();
  critic->score->bias.zero_();
  return critic;
}

CriticTrainer::CriticTrainer(CriticModel critic, const TrainerOptions& options,
                             const DataParallelConfig& data_parallel)
    : options_(options),
      model_(critic),
      compute_(make_compute_critic(critic, options)),
      master_(trainable_params(*model_), trainable_params(*compute_)),
      optimizer_(master_.master(), options.optimizer),
      data_parallel_(data_parallel, master_) {}

torch::Tensor CriticTrainer::compute_values(const TrainBatch& batch) {
  batch.validate();
  torch::NoGradGuard no_grad;
  const torch::Device device = compute_->score->weight.device();
  std::vector<int64_t> rows(static_cast<size_t>(batch.num_rows()));
  std::iota(rows.begin(), rows.end(), 0);
  torch::Tensor out;
  for (const MicroBatch& mb :
       make_micro_batches(batch, rows, options_.max_tokens_per_micro_batch, device)) {
    if (mb.num_response_tokens == 0) continue;
    torch::Tensor values = compute_->response_values(mb, /*recompute=*/false);
    if (!out.defined()) out = torch::zeros({batch.num_response_tokens()}, values.options());
    out.index_copy_(0, mb.batch_token_index, values);
  }
  return out.defined() ? out : torch::zeros({0}, torch::TensorOptions().device(device));
}

CriticMetrics CriticTrainer::update(const TrainBatch& batch, const CriticUpdateOptions& options) {
  batch.validate();
  check_input(options.epochs >= 1, "must be >= 1", "critic update: epochs");
  batch.token_column(columns::kValues, "critic update");
  batch.token_column(columns::kReturns, "critic update");
  const torch::Device device = compute_->score->weight.device();
  // Data parallel: steps follow the GLOBAL row count, denominators are global
  // (update_steps.h).
  CriticMetrics metrics;
  const UpdateLoopOptions loop{options.epochs, options.mini_batch_size, options.shuffle,
                               options.seed, options_.max_tokens_per_micro_batch};
  for_each_update_step(data_parallel_, batch, loop, device, [&](const UpdateStep& step_plan) {
    const std::vector<MicroBatch>& micro_batches = step_plan.micro_batches;
    const size_t last_backward = step_plan.last_backward;
    const int64_t mini_tokens = step_plan.global_tokens;
    const int64_t mini_rows = step_plan.global_rows;
    AggOptions agg = options.agg;
    agg.global_tokens = static_cast<double>(mini_tokens);
    agg.global_seqs = static_cast<double>(mini_rows);
    torch::Tensor loss_sum = torch::zeros({}, torch::kDouble);
    torch::Tensor clip_sum = torch::zeros({}, torch::kDouble);
    for (size_t i = 0; i < micro_batches.size(); ++i) {
      const MicroBatch& mb = micro_batches[i];
      if (mb.num_response_tokens == 0) continue;
      torch::Tensor values = compute_->response_values(mb, options_.recompute);
      const auto dtype = values.scalar_type();
      const PackedSeqs packed = response_packing(mb);  // model-token positions only
      ValueLossResult result = value_loss(
          values, mb.token_columns.at(columns::kValues).to(dtype),
          mb.token_columns.at(columns::kReturns).to(dtype), packed, options.clip_range, agg);
      if (i == last_backward) data_parallel_.before_last_backward();
      result.loss.backward();
      master_.accumulate_grads();
      const double weight = static_cast<double>(mb.num_loss_tokens) / mini_tokens;
      loss_sum += result.loss.detach().to(torch::kCPU, torch::kDouble);
      clip_sum += result.clip_frac.to(torch::kCPU, torch::kDouble) * weight;
    }
    step_and_count(data_parallel_, master_, optimizer_, metrics);
    metrics.value_loss += loss_sum.item<double>();
    metrics.clip_frac += clip_sum.item<double>();
  });
  if (data_parallel_.enabled()) {
    // Both sums carry global denominators: their sum over ranks is the global value.
    std::vector<double> sums = {metrics.value_loss, metrics.clip_frac};
    data_parallel_.sum_over_ranks(sums);
    metrics.value_loss = sums[0];
    metrics.clip_frac = sums[1];
  }
  const int64_t attempts = metrics.steps + metrics.skipped_steps;
  if (attempts > 0) {
    metrics.value_loss /= attempts;
    metrics.clip_frac /= attempts;
  }
  if (metrics.steps > 0) metrics.grad_norm /= metrics.steps;
  return metrics;
}

}  // namespace aspen::train
