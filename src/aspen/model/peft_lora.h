// A PEFT LoRA adapter (io/peft_adapter.h) applied to a model: what `aspen generate
// --lora`, `aspen logprobs --lora` and `aspen serve --lora` load.
//
// lora_options_of maps the adapter's config to LoraOptions: rank, alpha, dropout and
// use_rslora as written; targets are target_modules' last name components (PEFT matches
// "self_attn.q_proj" as a suffix: the leaf is what Aspen adapts), and routed experts
// get adapters when a tensor names one (".mlp.experts."). A target Aspen cannot adapt
// (lm_head, a MoE router "gate", embeddings, ...) is an aspen::Error naming `source`'s
// adapter_config.json and the entry.
//
// apply_peft_adapter attaches those adapters to `model` (which must have none) and
// loads the adapter's tensors into them. The tensors must be exactly the adapters the
// targets give: an adapter covering only some layers (PEFT's layers_to_transform, or
// target_modules naming single modules), or one whose shapes do not fit this model (an
// adapter trained on another base), is an aspen::Error naming `source` and the tensor,
// with the model's adapters then attached but not loaded (discard the model).
// The adapters are fp32 on the model's device whatever its dtype (model/lora.h).
// peft_adapter_of is the way back: `model`'s adapters as a PEFT adapter (its LoraOptions
// as the config, the adapter tensors as detached CPU copies), base_model_name_or_path =
// `base_model`; aspen::Error for a model without adapters.
// Thread safety: apply_peft_adapter mutates `model`; call before it is shared.
#pragma once

#include <string>

#include "aspen/io/peft_adapter.h"
#include "aspen/model/imports.h"
#include "aspen/model/lora.h"
#include "aspen/model/qwen_model.h"

namespace aspen::model {

LoraOptions lora_options_of(const LoraAdapter& adapter, const std::string& source);

void apply_peft_adapter(QwenForCausalLM& model, const LoraAdapter& adapter,
                        const std::string& source);

LoraAdapter peft_adapter_of(const QwenForCausalLMImpl& model, const std::string& base_model);

}  // namespace aspen::model
