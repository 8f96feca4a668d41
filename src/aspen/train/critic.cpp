#include "aspen/train/critic.h"

#include <optional>

#include "aspen/algo/packed.h"
#include "aspen/algo/value_loss.h"
#include "aspen/train/imports.h"
#include "aspen/train/model_copy.h"
#include "aspen/train/pipeline_pass.h"
#include "aspen/train/recompute.h"
#include "aspen/util/error.h"
#include "aspen/train/update_steps.h"
#include "aspen/train/whole_model_norm.h"

namespace aspen::train {
namespace {

CriticModel make_compute_critic(const CriticModel& master, const TrainerOptions& options) {
  options.validate();
  if (param_dtype(*master) == options.compute_dtype) return master;
  CriticModel copy(master->config, master->model->pp);
  copy->to(param_device(*master), options.compute_dtype);
  return copy;  // MasterWeights copies the master's values in
}

// The critic's decoder has no LM head, so no stage keeps a copy of a tied embedding as
// one (qwen_model.h): the last stage of a tied policy's critic holds no embedding.
ModelConfig decoder_config(ModelConfig config) {
  config.tie_word_embeddings = false;
  return config;
}

// [R] fp32 (fp64 for an fp64 model) to every stage of `pp` from its last stage.
void broadcast_from_last_stage(const PipelineStages& pp, torch::Tensor& values) {
  ProcessGroupHandle group = pp.require_group("critic pipeline parallelism");
  group.broadcast(values, pp.size - 1);
}

}  // namespace

CriticModelImpl::CriticModelImpl(const ModelConfig& config, const PipelineStages& pp)
    : config(config) {
  config.validate("critic config");
  model = register_module(
      "model", QwenModel(decoder_config(config), TensorParallel{}, ExpertParallel{}, pp));
  if (pp.last()) score = register_module("score", torch::nn::Linear(config.hidden_size, 1));
}

torch::Tensor CriticModelImpl::response_values(const MicroBatch& micro_batch, bool recompute) {
  check_input(!model->pp.enabled(), "a pipeline stage holds part of the critic",
              "CriticModel::response_values");
  return score_values(micro_batch, decoder_hidden(*model, micro_batch.input_ids,
                                                  micro_batch.cu_seqlens, recompute));
}

torch::Tensor CriticModelImpl::score_values(const MicroBatch& micro_batch,
                                            const torch::Tensor& hidden) {
  torch::Tensor values = score(hidden.index_select(0, micro_batch.hidden_index)).squeeze(-1);
  return values.scalar_type() == torch::kDouble ? values : values.to(torch::kFloat);
}

CriticModel critic_from_policy(const QwenForCausalLM& policy) {
  CriticModel critic(policy->config, policy->pp);
  critic->to(param_device(*policy), param_dtype(*policy));
  torch::NoGradGuard no_grad;
  const auto source = policy->model->named_parameters(/*recurse=*/true);
  for (auto& item : critic->model->named_parameters(/*recurse=*/true)) {
    item.value().copy_(source[item.key()]);
  }
  if (critic->score) {
    critic->score->weight.zero_();
    critic->score->bias.zero_();
  }
  return critic;
}

CriticTrainer::CriticTrainer(CriticModel critic, const TrainerOptions& options,
                             const DataParallelConfig& data_parallel)
    : options_(options),
      model_(critic),
      compute_(make_compute_critic(critic, options)),
      master_(trainable_params(*model_), trainable_params(*compute_)),
      optimizer_(master_.master(), options.optimizer),
      data_parallel_(data_parallel, master_) {
  // Pipeline parallelism: clipping by the norm of every stage's parameters.
  set_whole_model_clip_norm(optimizer_, model_->config, TensorParallel{}, ExpertParallel{},
                            model_->model->pp, /*tied_embedding_on_stages=*/false);
}

torch::Tensor CriticTrainer::compute_values(const TrainBatch& batch) {
  batch.validate();
  torch::NoGradGuard no_grad;
  const torch::Device device = param_device(*compute_);
  const auto micro_batches =
      make_micro_batches(batch, options_.max_tokens_per_micro_batch, device);
  const PipelineStages& pp = compute_->model->pp;
  if (pp.enabled()) {
    // The forward-only pass over the stages (pipeline_pass.h); every stage gets the last
    // stage's values.
    const auto dtype = param_dtype(*compute_) == torch::kDouble ? torch::kDouble : torch::kFloat;
    torch::Tensor values = torch::zeros({batch.num_response_tokens()},
                                        torch::TensorOptions().dtype(dtype).device(device));
    pipeline_forward_only(stage_forward(compute_->model), micro_batches, device,
                          [&](const MicroBatch& mb, const torch::Tensor& hidden) {
                            values.index_copy_(0, mb.batch_token_index,
                                               compute_->score_values(mb, hidden));
                          });
    broadcast_from_last_stage(pp, values);
    return values;
  }
  torch::Tensor out;
  for (const MicroBatch& mb : micro_batches) {
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
  const torch::Device device = param_device(*compute_);
  const PipelineStages& pp = compute_->model->pp;
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
    // Pipeline parallelism: the last stage runs this loop over the pass's messages, the
    // other stages their part of the 1F1B schedule (train/pipeline_pass.h).
    std::optional<PipelinePass> pipeline;
    if (pp.enabled()) pipeline.emplace(stage_forward(compute_->model), micro_batches);
    if (pipeline && !pipeline->last_stage()) {
      pipeline->run_stage();
      master_.accumulate_grads();
      pipeline->finish();
      step_and_count(data_parallel_, master_, optimizer_, metrics);
      return;
    }
    for (size_t i = 0; i < micro_batches.size(); ++i) {
      const MicroBatch& mb = micro_batches[i];
      if (mb.num_response_tokens == 0) continue;
      torch::Tensor values = pipeline
                                 ? compute_->score_values(mb, pipeline->forward(mb))
                                 : compute_->response_values(mb, options_.recompute);
      const auto dtype = values.scalar_type();
      const PackedSeqs packed = response_packing(mb);  // model-token positions only
      ValueLossResult result = value_loss(
          values, mb.token_columns.at(columns::kValues).to(dtype),
          mb.token_columns.at(columns::kReturns).to(dtype), packed, options.clip_range, agg);
      // Not armed on stages, as the actor's (pipeline_actor.h, DP x PP).
      if (i == last_backward && !pipeline) data_parallel_.before_last_backward();
      if (pipeline) {
        pipeline->backward(result.loss);
      } else {
        result.loss.backward();
      }
      master_.accumulate_grads();
      const double weight = static_cast<double>(mb.num_loss_tokens) / mini_tokens;
      loss_sum += result.loss.detach().to(torch::kCPU, torch::kDouble);
      clip_sum += result.clip_frac.to(torch::kCPU, torch::kDouble) * weight;
    }
    if (pipeline) pipeline->finish();
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
  if (pp.enabled()) {
    // The losses exist on the last stage only; steps and grad norm agree everywhere.
    torch::Tensor losses = torch::tensor({metrics.value_loss, metrics.clip_frac}, torch::kDouble);
    broadcast_from_last_stage(pp, losses);
    metrics.value_loss = losses[0].item<double>();
    metrics.clip_frac = losses[1].item<double>();
  }
  return metrics;
}

}  // namespace aspen::train
