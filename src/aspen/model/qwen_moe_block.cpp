#include "aspen/model/qwen_moe_block.h"

#include <vector>

#include "aspen/parallel/tp_collectives.h"

namespace aspen {

QwenSparseMoeBlockImpl::QwenSparseMoeBlockImpl(const ModelConfig& config, const TensorParallel& tp)
    : top_k(config.moe.num_experts_per_tok), norm_topk_prob(config.moe.norm_topk_prob), tp(tp) {
  gate = register_module(
      "gate", torch::nn::Linear(
                  torch::nn::LinearOptions(config.hidden_size, config.moe.num_experts).bias(false)));
  experts = register_module("experts", torch::nn::ModuleList());
  for (int64_t j = 0; j < config.moe.num_experts; ++j) {
    // Expert 0 of layer 0 stands for all: the layout depends on neither index.
    experts->push_back(QwenMLP(config, tp, config.moe.moe_intermediate_size,
                               "model.layers.0.mlp.experts.0.gate_proj.weight"));
  }
}

torch::Tensor QwenSparseMoeBlockImpl::forward(const torch::Tensor& x, MoeRoutingLog* log) {
  const int64_t tokens = x.size(0);
  if (tokens == 0) return torch::zeros_like(x);
  const RouterChoice choice = route_top_k(gate(x), top_k, norm_topk_prob);
  if (log != nullptr) log->layers.push_back(layer_routing(choice));

  // Group the T*k (token, expert) slots by expert; slot s belongs to token s / k.
  const torch::Tensor slot_experts = choice.experts.reshape(-1);
  const torch::Tensor order = std::get<1>(slot_experts.sort(std::optional<bool>(true), /*dim=*/0));
  const torch::Tensor slot_tokens = order.div(top_k, "floor");
  const torch::Tensor counts =
      torch::bincount(slot_experts, /*weights=*/{}, experts->size()).to(torch::kCPU);
  const int64_t* count = counts.data_ptr<int64_t>();

  const torch::Tensor grouped = copy_to_tp_region(x, tp).index_select(0, slot_tokens);
  std::vector<torch::Tensor> outputs;
  int64_t begin = 0;
  for (int64_t e = 0; e < static_cast<int64_t>(experts->size()); ++e) {
    if (count[e] == 0) continue;
    outputs.push_back(
        experts[e]->as<QwenMLP>()->forward_local(grouped.narrow(0, begin, count[e])));
    begin += count[e];
  }
  const torch::Tensor expert_out = reduce_from_tp_region(torch::cat(outputs), tp);
  const torch::Tensor slot_weights = choice.weights.reshape({-1, 1}).index_select(0, order);
  return torch::zeros({tokens, x.size(1)}, x.options())
      .index_add(0, slot_tokens, expert_out * slot_weights);
}

}  // namespace aspen
