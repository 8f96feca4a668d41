// A second model over the same base weights: what `aspen serve --lora` builds for each
// adapter, so that N adapters cost N adapters (and their KV caches), not N models.
//
// share_base_weights(base) builds a model of base's config and parallel contexts and
// points every parameter and buffer of it at base's tensor (Tensor::set_data): the same
// storage, offset and strides - one copy of the weights in memory, whatever the device.
// Attach adapters to the result (attach_lora, load_lora_state): they are its own.
//
// Fusing: call base->fuse_projections() BEFORE sharing (a rollout engine over base does
// it when built). The result's q/k/v and gate/up then view base's fused matrices, and
// fusing the result (its own engine) adopts them without a copy (FusedProjection).
// Fusing base after sharing would give base new matrices and hold those weights twice.
//
// Cost: building the result allocates and initialises a full model on the CPU first
// (torch modules cannot be built without their tensors), freed as the parameters are
// re-pointed: a transient of one model's size in host memory, not on the device.
//
// Writes through either model's parameters (copy_) are seen by both: do not train or
// publish weights into a shared base while the other model runs.
// Errors: aspen::Error when base has LoRA adapters (a base is shared without them).
#pragma once

#include "aspen/model/imports.h"
#include "aspen/model/qwen_model.h"

namespace aspen::model {

QwenForCausalLM share_base_weights(const QwenForCausalLM& base);

}  // namespace aspen::model
