#include "aspen/model/qwen_mlp.h"

#include "aspen/kernels/swiglu.h"
#include "aspen/model/tp_layout.h"
#include "aspen/parallel/tp_collectives.h"

namespace aspen {
namespace {

torch::nn::Linear make_linear(int64_t in, int64_t out) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
}

}  // namespace

QwenMLPImpl::QwenMLPImpl(const ModelConfig& config, const TensorParallel& tp) : tp(tp) {
  const int64_t hidden = config.hidden_size;
  // Layer 0's name stands for every layer: the layout does not depend on the index.
  const ShardSpec spec = qwen_shard_spec("model.layers.0.mlp.gate_proj.weight", config);
  const int64_t inter =
      shard_range(spec, config.intermediate_size, tp.rank, tp.size, "intermediate_size").length;
  gate_proj = register_module("gate_proj", make_linear(hidden, inter));
  up_proj = register_module("up_proj", make_linear(hidden, inter));
  down_proj = register_module("down_proj", make_linear(inter, hidden));
}

torch::Tensor QwenMLPImpl::forward(const torch::Tensor& x) {
  const torch::Tensor x_tp = copy_to_tp_region(x, tp);
  return reduce_from_tp_region(down_proj(swiglu(gate_proj(x_tp), up_proj(x_tp))), tp);
}

}  // namespace aspen
