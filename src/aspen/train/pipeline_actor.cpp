#include "aspen/train/pipeline_actor.h"

#include <cmath>
#include <string>
#include <utility>

#include "aspen/parallel/pipeline_p2p.h"
#include "aspen/train/imports.h"
#include "aspen/train/pipeline_runner.h"
#include "aspen/util/error.h"

namespace aspen::train {
namespace {

std::string stage_name(const QwenForCausalLM& model) {
  return "pipeline stage " + std::to_string(model->pp.stage);
}

}  // namespace

PipelineActorPass::PipelineActorPass(QwenForCausalLM model,
                                     const std::vector<MicroBatch>& micro_batches)
    : model_(std::move(model)) {
  group_ = model_->pp.require_group(stage_name(model_));
  for (const MicroBatch& mb : micro_batches) {
    if (mb.num_response_tokens > 0) trained_.push_back(mb);
  }
}

void PipelineActorPass::run_stage() {
  check_input(!last_stage(), "the last stage runs the actor's own loop", stage_name(model_));
  if (trained_.empty()) return;  // the last stage skips the step too
  run_one_f_one_b(model_, trained_, [this](QwenForCausalLM&, size_t, const torch::Tensor&) {
    check_input(false, "only the last stage computes a loss", stage_name(model_));
    return torch::Tensor();
  });
}

TokenLogprobs PipelineActorPass::response_logprobs(const MicroBatch& micro_batch,
                                                   const LogprobHeadOptions& head) {
  const std::string where = stage_name(model_);
  check_input(last_stage() && !input_.defined() && next_ < trained_.size() &&
                  trained_[next_].num_tokens == micro_batch.num_tokens,
              "micro-batches out of the pipeline's order", where);
  input_ = recv_tensor(*group_, model_->pp.stage - 1, kActivationTag,
                       micro_batch.input_ids.device());
  check_input(input_.dim() == 2 && input_.size(0) == micro_batch.num_tokens,
              "received activations of shape " + c10::str(input_.sizes()) + " for " +
                  std::to_string(micro_batch.num_tokens) + " tokens",
              where);
  input_.requires_grad_(true);
  const torch::Tensor hidden = model_->forward_stage(input_, micro_batch.cu_seqlens);
  return model_->head_logprobs(hidden.index_select(0, micro_batch.hidden_index),
                               micro_batch.target_ids, head);
}

void PipelineActorPass::backward(const torch::Tensor& loss) {
  check_input(input_.defined(), "backward without a forward", stage_name(model_));
  loss.backward();
  // No path from the input to the loss would leave it without a gradient; the previous
  // stage still waits for one.
  const torch::Tensor grad =
      input_.grad().defined() ? input_.grad() : torch::zeros_like(input_);
  sends_.push_back(send_tensor(*group_, grad, model_->pp.stage - 1, kGradientTag));
  input_ = torch::Tensor();
  ++next_;
}

void PipelineActorPass::finish(QwenForCausalLM& master) {
  for (PendingWork& work : sends_) work.wait();
  sends_.clear();
  check_input(!last_stage() || next_ == trained_.size(),
              "ran " + std::to_string(next_) + " of " + std::to_string(trained_.size()) +
                  " micro-batches",
              stage_name(model_));
  if (trained_.empty()) return;  // no backward ran: nothing to sum
  sum_tied_embedding_gradient(master);
}

void share_last_stage_metrics(const QwenForCausalLM& model, ActorMetrics& m) {
  const PipelineStages& pp = model->pp;
  if (!pp.enabled()) return;
  std::vector<double*> reals = {
      &m.policy_loss, &m.kl_loss, &m.router_aux_loss, &m.router_load_max,
      &m.router_load_mean, &m.router_topk_mismatch, &m.entropy, &m.clip_frac,
      &m.approx_kl, &m.grad_norm, &m.lr, &m.rollout_logprob_diff_mean,
      &m.rollout_logprob_diff_max, &m.correction_capped_frac, &m.rollout_is_mean,
      &m.rollout_is_ratio_mean, &m.rollout_is_ratio_max, &m.rollout_is_ratio_min,
      &m.rollout_is_truncated_frac, &m.rollout_rs_masked_frac, &m.rollout_corr_kl};
  std::vector<int64_t*> counts = {&m.router_topk_compared, &m.steps, &m.skipped_steps,
                                  &m.tokens, &m.micro_batches, &m.rollout_logprob_diff_tokens};
  torch::Tensor values = torch::zeros({static_cast<int64_t>(reals.size() + counts.size())},
                                      torch::kDouble);
  double* v = values.data_ptr<double>();
  for (size_t i = 0; i < reals.size(); ++i) v[i] = *reals[i];
  for (size_t i = 0; i < counts.size(); ++i) v[reals.size() + i] = static_cast<double>(*counts[i]);
  ProcessGroupHandle group = pp.require_group("actor metrics");
  group.broadcast(values, pp.size - 1);
  v = values.data_ptr<double>();
  for (size_t i = 0; i < reals.size(); ++i) *reals[i] = v[i];
  for (size_t i = 0; i < counts.size(); ++i) {
    *counts[i] = static_cast<int64_t>(std::llround(v[reals.size() + i]));  // exact below 2^53
  }
}

void check_pipeline_actor(const QwenForCausalLM& model) {
  if (!model->pp.enabled()) return;
  const char* key = "placement.train.pp";
  check_input(!model->ep.enabled(), "does not combine with placement.train.ep > 1 yet", key);
  // The routing log of a forward stays on its stage: the last stage's load-balancing
  // loss and router metrics would count its own layers only.
  check_input(!model->config.is_moe(),
              "does not train a MoE model yet (the load-balancing loss would miss the other "
              "stages' layers)",
              key);
}

}  // namespace aspen::train
