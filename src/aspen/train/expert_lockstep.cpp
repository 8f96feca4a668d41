#include "aspen/train/expert_lockstep.h"

#include "aspen/train/imports.h"
#include "aspen/train/micro_batches.h"
#include "aspen/train/policy_logprobs.h"

namespace aspen::train {

bool in_expert_lockstep(const QwenForCausalLM& model) {
  return model->ep.enabled() && !model->ep.replicated_tokens;
}

int64_t lockstep_count(const QwenForCausalLM& model, int64_t local_count) {
  if (!in_expert_lockstep(model)) return local_count;
  torch::Tensor count = torch::tensor({local_count}, torch::kInt64);
  ProcessGroupHandle(*model->ep.group).all_reduce(count, ReduceOp::kMax);
  return count.item<int64_t>();
}

MicroBatch padding_micro_batch(torch::Device device) {
  TrainBatch padding;
  padding.prompts = {{0}};
  padding.responses = {{0}};
  return pack_rows(padding, {0}, device);
}

void padding_pass(QwenForCausalLM& model, const LogprobHeadOptions& head, bool recompute) {
  const MicroBatch mb = padding_micro_batch(model->lm_head_weight().device());
  MoeRoutingLog routing;  // recorded, as the real passes do, then unused
  const TokenLogprobs out = response_logprobs(model, mb, head, recompute, &routing);
  if (torch::GradMode::is_enabled() && out.logprobs.requires_grad()) {
    (out.logprobs.sum() * 0.0).backward();
  }
}

}  // namespace aspen::train
