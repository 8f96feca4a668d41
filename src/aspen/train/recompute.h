// Decoder forward with optional activation recompute (gradient checkpointing).
//
// With recompute on, each decoder layer runs its forward without recording a graph
// and keeps only its input x [T, C]; backward re-runs that layer's forward with grad
// enabled and back-propagates through it (reentrant, like torch.utils.checkpoint's
// default). Activation memory drops from every layer's intermediates to one [T, C]
// input per layer, for roughly one extra forward. Layers are deterministic (no
// dropout), so gradients equal the plain forward's up to nothing: tested bitwise-close.
// The model API is not changed: this walks model.layers and calls each layer's
// forward(h, rope, cu_seqlens), as QwenModelImpl::forward does.
//
// Shapes: T = packed tokens, B = sequences, C = hidden size.
//   input_ids [T] int64, cu_seqlens [B+1] int64 -> hidden [T, C] after the final norm.
// Contract: the model must outlive the backward pass of the returned tensor.
// Errors: aspen::Error for malformed ids/offsets (model/packing.h).
// Thread safety: as QwenModelImpl::forward.
#pragma once

#include <torch/torch.h>

#include "aspen/model/qwen_model.h"
#include "aspen/train/imports.h"

namespace aspen::train {

// `log` (optional): the sparse layers' routing, for the load-balancing loss; its
// prob_sums are differentiable with recompute on too (the checkpointed layer returns
// them as a second output and back-propagates their gradient when it re-runs).
torch::Tensor decoder_hidden(QwenModelImpl& model, const torch::Tensor& input_ids,
                             const torch::Tensor& cu_seqlens, bool recompute,
                             MoeRoutingLog* log = nullptr);

}  // namespace aspen::train
