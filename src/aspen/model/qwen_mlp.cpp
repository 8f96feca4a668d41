#include "aspen/model/qwen_mlp.h"

#include "aspen/kernels/small_batch_linear.h"
#include "aspen/kernels/swiglu.h"
#include "aspen/model/imports.h"
#include "aspen/model/tp_layout.h"
#include "aspen/parallel/tp_collectives.h"
#include "aspen/util/error.h"

namespace aspen::model {
namespace {

torch::nn::Linear make_linear(int64_t in, int64_t out) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
}

}  // namespace

// Layer 0's name stands for every layer: the layout does not depend on the index.
QwenMLPImpl::QwenMLPImpl(const ModelConfig& config, const TensorParallel& tp)
    : QwenMLPImpl(config, tp, config.intermediate_size, "model.layers.0.mlp.gate_proj.weight") {}

QwenMLPImpl::QwenMLPImpl(const ModelConfig& config, const TensorParallel& tp,
                         int64_t intermediate, const std::string& layout_name)
    : tp(tp) {
  const int64_t hidden = config.hidden_size;
  const ShardSpec spec = qwen_shard_spec(layout_name, config);
  const int64_t inter = shard_range(spec, intermediate, tp.rank, tp.size, layout_name).length;
  gate_proj = register_module("gate_proj", make_linear(hidden, inter));
  up_proj = register_module("up_proj", make_linear(hidden, inter));
  down_proj = register_module("down_proj", make_linear(inter, hidden));
}

torch::Tensor QwenMLPImpl::forward(const torch::Tensor& x) {
  return reduce_from_tp_region(forward_local(copy_to_tp_region(x, tp)), tp);
}

torch::Tensor QwenMLPImpl::forward_local(const torch::Tensor& x_tp) {
  // small_batch_linear is F::linear except at a decode step's few rows, no gradient.
  torch::Tensor gate, up;
  if (gate_up_.usable_for_inference()) {
    const std::vector<torch::Tensor> parts = gate_up_.split(gate_up_.forward(x_tp));
    gate = parts[0], up = parts[1];
  } else {
    gate = gate_proj(x_tp), up = up_proj(x_tp);
  }
  const torch::Tensor hidden = swiglu(gate_lora.add(x_tp, gate), up_lora.add(x_tp, up));
  return down_lora.add(hidden,
                       small_batch_linear(hidden, down_proj->weight, down_proj->bias));
}

void QwenMLPImpl::fuse_projections() { gate_up_.fuse({gate_proj, up_proj}); }

void QwenMLPImpl::attach_lora(const LoraOptions& options,
                              const std::shared_ptr<const LoraSwitch>& on,
                              const ModelConfig& config, const std::string& layout_name) {
  // layout_name is the gate_proj weight's name; its siblings differ in the leaf only.
  const std::string prefix = layout_name.substr(0, layout_name.size() - std::string("gate_proj.weight").size());
  auto attach = [&](LoraBranch& branch, torch::nn::Linear& target, const std::string& leaf) {
    if (!options.targets_projection(leaf)) return;
    check_input(!branch.attached(), "already has a LoRA adapter", prefix + leaf);
    const ShardSpec spec = qwen_shard_spec(prefix + leaf + ".weight", config);
    branch = LoraBranch(target, options, on, lora_a_spec(spec), lora_b_spec(spec), tp);
  };
  attach(gate_lora, gate_proj, "gate_proj");
  attach(up_lora, up_proj, "up_proj");
  attach(down_lora, down_proj, "down_proj");
}

}  // namespace aspen::model
