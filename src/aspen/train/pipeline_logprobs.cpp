#include "aspen/train/pipeline_logprobs.h"

#include <string>
#include <vector>

#include "aspen/train/expert_lockstep.h"
#include "aspen/train/pipeline_pass.h"
#include "aspen/train/imports.h"
#include "aspen/train/micro_batches.h"
#include "aspen/train/policy_logprobs.h"
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
  TokenLogprobs out = zero_token_logprobs(batch, any_param, head.with_entropy);
  const auto dtype = out.logprobs.scalar_type();
  std::vector<MicroBatch> micro_batches = make_micro_batches(batch, max_tokens, device);
  // Expert parallelism: as many passes as the EP rank with the most, padding last.
  int64_t real = 0;
  for (const MicroBatch& mb : micro_batches) real += mb.num_response_tokens > 0 ? 1 : 0;
  for (int64_t k = real, target = lockstep_count(model, real); k < target; ++k) {
    micro_batches.push_back(padding_micro_batch(device));
  }
  int64_t scored = 0;
  pipeline_forward_only(stage_forward(model), micro_batches,
                        device, [&](const MicroBatch& mb, const torch::Tensor& hidden) {
                          if (scored++ >= real) return;  // a padding pass
                          const TokenLogprobs part = model->head_logprobs(
                              hidden.index_select(0, mb.hidden_index), mb.target_ids, head);
                          out.logprobs.index_copy_(0, mb.batch_token_index,
                                                   part.logprobs.to(dtype));
                          if (head.with_entropy) {
                            out.entropy.index_copy_(0, mb.batch_token_index,
                                                    part.entropy.to(dtype));
                          }
                        });
  // Every stage returns the last stage's values.
  group.broadcast(out.logprobs, pp.size - 1);
  if (head.with_entropy) group.broadcast(out.entropy, pp.size - 1);
  return out;
}

}  // namespace aspen::train
