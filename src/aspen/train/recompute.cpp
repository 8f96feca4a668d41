#include "aspen/train/recompute.h"

#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>

#include "aspen/model/packing.h"
#include "aspen/model/rope_frequencies.h"
#include "aspen/train/imports.h"

namespace aspen::train {
namespace {

// Inputs: x (the only differentiable one), the layer (as an address: saved_data holds
// IValues only; the layer outlives the graph by contract), the RoPE table and offsets.
struct CheckpointedLayer : torch::autograd::Function<CheckpointedLayer> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               int64_t layer_address, const torch::Tensor& cos,
                               const torch::Tensor& sin, const torch::Tensor& cu_seqlens) {
    ctx->save_for_backward({x});
    ctx->saved_data["layer"] = layer_address;
    ctx->saved_data["cos"] = cos;
    ctx->saved_data["sin"] = sin;
    ctx->saved_data["cu_seqlens"] = cu_seqlens;
    auto* layer = reinterpret_cast<QwenDecoderLayerImpl*>(layer_address);
    return layer->forward(x, RopeTable{cos, sin}, cu_seqlens);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    auto* layer = reinterpret_cast<QwenDecoderLayerImpl*>(ctx->saved_data["layer"].toInt());
    const RopeTable rope{ctx->saved_data["cos"].toTensor(), ctx->saved_data["sin"].toTensor()};
    const torch::Tensor cu_seqlens = ctx->saved_data["cu_seqlens"].toTensor();
    torch::Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    {
      torch::AutoGradMode enable(true);
      torch::Tensor out = layer->forward(x, rope, cu_seqlens);
      // Parameter grads accumulate into the layer's leaves; x's grad flows on below.
      torch::autograd::backward({out}, {grad_out[0]});
    }
    return {x.grad(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

// A sparse (MoE) layer whose routing is recorded: outputs {out, prob_sum [E],
// assignments [E], experts [T, k]}; `replay` [T, k] is the layer's routing replay
// (moe_routing.h), used by the forward and by backward's re-run; empty: none (a custom
// Function's inputs must be defined tensors). prob_sum is differentiable (the load-balancing loss's gradient
// reaches the router through it); the assignments are counts. Backward re-runs the
// layer and back-propagates both differentiable outputs' gradients at once.
struct CheckpointedSparseLayer : torch::autograd::Function<CheckpointedSparseLayer> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const torch::Tensor& x, int64_t layer_address,
                                                const torch::Tensor& cos, const torch::Tensor& sin,
                                                const torch::Tensor& cu_seqlens,
                                                const torch::Tensor& replay) {
    ctx->save_for_backward({x});
    ctx->saved_data["layer"] = layer_address;
    ctx->saved_data["cos"] = cos;
    ctx->saved_data["sin"] = sin;
    ctx->saved_data["cu_seqlens"] = cu_seqlens;
    ctx->saved_data["replay"] = replay;
    auto* layer = reinterpret_cast<QwenDecoderLayerImpl*>(layer_address);
    MoeRoutingLog log;
    if (replay.numel() > 0) log.replay = replay.unsqueeze(1);
    torch::Tensor out = layer->forward(x, RopeTable{cos, sin}, cu_seqlens, &log);
    const LayerRouting& routing = log.layers.at(0);
    ctx->mark_non_differentiable({routing.assignments, routing.experts});
    return {out, routing.prob_sum, routing.assignments, routing.experts};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    auto* layer = reinterpret_cast<QwenDecoderLayerImpl*>(ctx->saved_data["layer"].toInt());
    const RopeTable rope{ctx->saved_data["cos"].toTensor(), ctx->saved_data["sin"].toTensor()};
    const torch::Tensor cu_seqlens = ctx->saved_data["cu_seqlens"].toTensor();
    torch::Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    {
      torch::AutoGradMode enable(true);
      MoeRoutingLog log;
      const torch::Tensor replay = ctx->saved_data["replay"].toTensor();
      if (replay.numel() > 0) log.replay = replay.unsqueeze(1);
      torch::Tensor out = layer->forward(x, rope, cu_seqlens, &log);
      torch::autograd::variable_list outputs = {out};
      torch::autograd::variable_list grads = {grad_out[0]};
      if (grad_out[1].defined()) {
        outputs.push_back(log.layers.at(0).prob_sum);
        grads.push_back(grad_out[1]);
      }
      torch::autograd::backward(outputs, grads);
    }
    return {x.grad(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

torch::Tensor decoder_hidden(QwenModelImpl& model, const torch::Tensor& input_ids,
                             const torch::Tensor& cu_seqlens, bool recompute,
                             MoeRoutingLog* log) {
  const std::vector<int64_t> offsets =
      check_packed_batch(input_ids, cu_seqlens, model.config.vocab_size);
  const torch::Tensor positions = packed_positions(offsets, input_ids.device());
  if (!recompute || !torch::GradMode::is_enabled()) {
    return model.forward(input_ids, cu_seqlens, positions, log);
  }
  const RopeTable rope = model_rope_table(model.config, positions);
  torch::Tensor h = model.embed(input_ids);  // vocab-parallel under TP
  // Without a grad path into the first layer, backward would never reach the
  // checkpoints and the layers' parameters would silently get no gradient. A frozen
  // embedding (LoRA: only the adapters train) gives the path a leaf of its own, whose
  // gradient is computed and dropped.
  if (!h.requires_grad()) h = h.detach().requires_grad_(true);
  for (QwenDecoderLayerImpl* impl : model.stage_layers()) {
    const auto address = reinterpret_cast<int64_t>(impl);
    if (log != nullptr && impl->sparse_mlp) {
      const torch::Tensor replay = log->replay_of(static_cast<int64_t>(log->layers.size()));
      torch::autograd::variable_list out =
          CheckpointedSparseLayer::apply(h, address, rope.cos, rope.sin, cu_seqlens,
                                         replay.defined() ? replay : torch::zeros({0}, torch::kLong));
      h = out[0];
      log->layers.push_back({out[1], out[2], h.size(0), out[3]});
    } else {
      h = CheckpointedLayer::apply(h, address, rope.cos, rope.sin, cu_seqlens);
    }
  }
  return model.norm(h);
}

}  // namespace aspen::train
