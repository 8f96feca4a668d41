#include "aspen/train/recompute.h"

#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>

#include "aspen/model/packing.h"

namespace aspen {
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

}  // namespace

torch::Tensor decoder_hidden(QwenModelImpl& model, const torch::Tensor& input_ids,
                             const torch::Tensor& cu_seqlens, bool recompute) {
  const std::vector<int64_t> offsets =
      check_packed_batch(input_ids, cu_seqlens, model.config.vocab_size);
  const torch::Tensor positions = packed_positions(offsets, input_ids.device());
  if (!recompute || !torch::GradMode::is_enabled()) {
    return model.forward(input_ids, cu_seqlens, positions);
  }
  const RopeTable rope = make_rope_table(positions, model.config.head_dim, model.config.rope_theta);
  torch::Tensor h = model.embed(input_ids);  // vocab-parallel under TP
  // Without a grad path into the first layer, backward would never reach the
  // checkpoints and the layers' parameters would silently get no gradient.
  TORCH_CHECK(h.requires_grad(), "activation recompute needs a trainable embedding");
  for (const auto& layer : *model.layers) {
    auto* impl = layer->as<QwenDecoderLayer>();
    h = CheckpointedLayer::apply(h, reinterpret_cast<int64_t>(impl), rope.cos, rope.sin,
                                 cu_seqlens);
  }
  return model.norm(h);
}

}  // namespace aspen
