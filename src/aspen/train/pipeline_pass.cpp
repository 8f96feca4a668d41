#include "aspen/train/pipeline_pass.h"

#include <string>
#include <utility>

#include "aspen/parallel/pipeline_p2p.h"
#include "aspen/train/pipeline_routing.h"
#include "aspen/train/imports.h"
#include "aspen/util/error.h"

namespace aspen::train {
namespace {

std::string stage_name(const PipelineStages& pp) {
  return "pipeline stage " + std::to_string(pp.stage);
}

}  // namespace

PipelinePass::PipelinePass(StageForward stage, const std::vector<MicroBatch>& micro_batches)
    : stage_(std::move(stage)) {
  group_ = stage_.pp.require_group(stage_name(stage_.pp));
  for (const MicroBatch& mb : micro_batches) {
    if (mb.num_response_tokens > 0) trained_.push_back(mb);
  }
}

void PipelinePass::run_stage() {
  const std::string where = stage_name(stage_.pp);
  check_input(!last_stage(), "the last stage runs the trainer's own loop", where);
  if (trained_.empty()) return;  // the last stage skips the step too
  run_one_f_one_b(stage_, trained_, [where](size_t, const torch::Tensor&) {
    check_input(false, "only the last stage computes a loss", where);
    return torch::Tensor();
  });
}

torch::Tensor PipelinePass::forward(const MicroBatch& micro_batch, MoeRoutingLog* log) {
  const std::string where = stage_name(stage_.pp);
  check_input(last_stage() && !input_.defined() && next_ < trained_.size() &&
                  trained_[next_].num_tokens == micro_batch.num_tokens,
              "micro-batches out of the pipeline's order", where);
  input_ = recv_tensor(*group_, stage_.pp.stage - 1, kActivationTag,
                       micro_batch.input_ids.device());
  check_input(input_.dim() == 2 && input_.size(0) == micro_batch.num_tokens,
              "received activations of shape " + c10::str(input_.sizes()) + " for " +
                  std::to_string(micro_batch.num_tokens) + " tokens",
              where);
  input_.requires_grad_(true);
  if (!stage_.routes()) return stage_.forward(input_, micro_batch.cu_seqlens, nullptr);
  check_input(log != nullptr, "a MoE stage's forward needs a routing log", where);
  *log = recv_routing(*group_, stage_.pp.stage - 1, micro_batch.num_tokens, input_.device());
  const torch::Tensor hidden = stage_.forward(input_, micro_batch.cu_seqlens, log);
  routing_ = *log;
  return hidden;
}

void PipelinePass::backward(const torch::Tensor& loss, double aux_scale) {
  check_input(input_.defined(), "backward without a forward", stage_name(stage_.pp));
  loss.backward();
  // No path from the input to the loss would leave it without a gradient; the previous
  // stage still waits for one.
  const torch::Tensor grad = input_.grad().defined() ? input_.grad() : torch::zeros_like(input_);
  sends_.push_back(send_tensor(*group_, grad, stage_.pp.stage - 1, kGradientTag));
  if (stage_.routes()) {
    sends_.push_back(send_tensor(*group_, routing_feedback(routing_, aux_scale),
                                 stage_.pp.stage - 1, kGradientTag));
  }
  routing_ = MoeRoutingLog{};
  input_ = torch::Tensor();
  ++next_;
}

void PipelinePass::finish() {
  for (PendingWork& work : sends_) work.wait();
  sends_.clear();
  check_input(!last_stage() || next_ == trained_.size(),
              "ran " + std::to_string(next_) + " of " + std::to_string(trained_.size()) +
                  " micro-batches",
              stage_name(stage_.pp));
}

void pipeline_forward_only(
    const StageForward& stage, const std::vector<MicroBatch>& micro_batches, torch::Device device,
    const std::function<void(const MicroBatch& micro_batch, const torch::Tensor& hidden)>& score) {
  const PipelineStages& pp = stage.pp;
  const std::string where = stage_name(pp) + " forward pass";
  ProcessGroupHandle group = pp.require_group(where);
  std::vector<PendingWork> sends;  // waited at the end: Gloo sends complete on the peer's recv
  for (const MicroBatch& mb : micro_batches) {
    if (mb.num_response_tokens == 0) continue;  // every stage skips the same ones
    torch::Tensor input = mb.input_ids;
    if (!pp.first()) {
      input = recv_tensor(group, pp.stage - 1, kActivationTag, device);
      check_input(input.dim() == 2 && input.size(0) == mb.num_tokens,
                  "received activations of shape " + c10::str(input.sizes()) +
                      " for a micro-batch of " + std::to_string(mb.num_tokens) + " tokens",
                  where);
    }
    const torch::Tensor hidden = stage.forward(input, mb.cu_seqlens, nullptr);
    if (pp.last()) {
      score(mb, hidden);
    } else {
      sends.push_back(send_tensor(group, hidden, pp.stage + 1, kActivationTag));
    }
  }
  for (PendingWork& work : sends) work.wait();
}

}  // namespace aspen::train
