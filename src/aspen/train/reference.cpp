#include "aspen/train/reference.h"

#include <optional>

#include "aspen/train/imports.h"
#include "aspen/train/model_copy.h"
#include "aspen/train/policy_logprobs.h"
#include "aspen/util/error.h"

namespace aspen::train {

ReferencePolicy::ReferencePolicy(const QwenForCausalLM& policy, const ReferenceOptions& options)
    : options_(options),
      model_(policy->has_lora() ? policy
                                : copy_model(policy, options.dtype,
                                             param_device(*policy),
                                             /*trainable=*/false)) {
  check_input(options.max_tokens_per_micro_batch >= 1, "must be >= 1",
              "reference.max_tokens_per_micro_batch");
}

torch::Tensor ReferencePolicy::compute_logprobs(const TrainBatch& batch) {
  LogprobHeadOptions head = options_.head;
  head.with_entropy = false;
  std::optional<LoraDisabled> base_only;  // under LoRA the reference is the base
  if (model_->has_lora()) base_only.emplace();
  return batch_logprobs(model_, batch, options_.max_tokens_per_micro_batch, head).logprobs;
}

}  // namespace aspen::train
