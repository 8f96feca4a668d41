#include "aspen/train/pipeline_logprobs.h"

#include <numeric>
#include <string>
#include <vector>

#include "aspen/parallel/pipeline_p2p.h"
#include "aspen/train/imports.h"
#include "aspen/train/micro_batches.h"
#include "aspen/util/error.h"

namespace aspen::train {

TokenLogprobs pipeline_batch_logprobs(QwenForCausalLM& model, const TrainBatch& batch,
                                      int64_t max_tokens, const LogprobHeadOptions& head) {
  batch.validate();
  const PipelineStages& pp = model->pp;
  const std::string where = "pipeline stage " + std::to_string(pp.stage) + " log-probs";
  ProcessGroupHandle group = pp.require_group(where);
  torch::NoGradGuard no_grad;
  // The device and dtype of the stage's own parameters (a middle stage has no head).
  const torch::Tensor any_param = model->parameters().front();
  const torch::Device device = any_param.device();
  const auto dtype = any_param.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  const auto options = torch::TensorOptions().dtype(dtype).device(device);
  TokenLogprobs out;
  out.logprobs = torch::zeros({batch.num_response_tokens()}, options);
  if (head.with_entropy) out.entropy = torch::zeros({batch.num_response_tokens()}, options);
  std::vector<int64_t> rows(static_cast<size_t>(batch.num_rows()));
  std::iota(rows.begin(), rows.end(), 0);
  std::vector<PendingWork> sends;  // waited at the end: Gloo sends complete on the peer's recv
  for (const MicroBatch& mb : make_micro_batches(batch, rows, max_tokens, device)) {
    if (mb.num_response_tokens == 0) continue;  // every stage skips the same ones
    torch::Tensor input = mb.input_ids;
    if (!pp.first()) {
      input = recv_tensor(group, pp.stage - 1, kActivationTag, device);
      check_input(input.dim() == 2 && input.size(0) == mb.num_tokens,
                  "received activations of shape " + c10::str(input.sizes()) +
                      " for a micro-batch of " + std::to_string(mb.num_tokens) + " tokens",
                  where);
    }
    const torch::Tensor hidden = model->forward_stage(input, mb.cu_seqlens);
    if (!pp.last()) {
      sends.push_back(send_tensor(group, hidden, pp.stage + 1, kActivationTag));
      continue;
    }
    const TokenLogprobs part =
        model->head_logprobs(hidden.index_select(0, mb.hidden_index), mb.target_ids, head);
    out.logprobs.index_copy_(0, mb.batch_token_index, part.logprobs.to(dtype));
    if (head.with_entropy) out.entropy.index_copy_(0, mb.batch_token_index, part.entropy.to(dtype));
  }
  for (PendingWork& work : sends) work.wait();
  // Every stage returns the last stage's values.
  group.broadcast(out.logprobs, pp.size - 1);
  if (head.with_entropy) group.broadcast(out.entropy, pp.size - 1);
  return out;
}

}  // namespace aspen::train
