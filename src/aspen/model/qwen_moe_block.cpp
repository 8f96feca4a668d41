#include "aspen/model/qwen_moe_block.h"

#include <string>
#include <vector>

#include "aspen/model/imports.h"
#include "aspen/parallel/tp_collectives.h"
#include "aspen/util/error.h"

namespace aspen::model {

QwenSparseMoeBlockImpl::QwenSparseMoeBlockImpl(const ModelConfig& config, const TensorParallel& tp,
                                               const ExpertParallel& ep)
    : num_experts(config.moe.num_experts),
      top_k(config.moe.num_experts_per_tok),
      norm_topk_prob(config.moe.norm_topk_prob),
      scoring(config.moe.scoring),
      grouped{config.moe.num_experts_per_tok, config.moe.n_group, config.moe.topk_group,
              config.moe.norm_topk_prob, config.moe.routed_scaling_factor},
      tp(tp),
      ep(ep) {
  // Both: the EP group is the TP group (its ranks hold the same tokens), and each expert
  // is whole on one of its ranks instead of split over all of them.
  check_input(!(tp.enabled() && ep.enabled()) || (ep.replicated_tokens && ep.size == tp.size),
              "experts split over the tensor-parallel group by expert parallelism need the "
              "EP group to be the TP group (replicated tokens, the same size)",
              "MoE layer (TP size " + std::to_string(tp.size) + ", EP size " +
                  std::to_string(ep.size) + ")");
  first_local = ep.first_local_expert(num_experts);
  const int64_t count = ep.local_expert_count(num_experts);
  gate = register_module("gate", torch::nn::Linear(torch::nn::LinearOptions(
                                                       config.hidden_size, num_experts)
                                                       .bias(false)));
  if (scoring == RouterScoring::kSigmoidGroupLimited) {
    e_score_correction_bias = gate->register_parameter(
        "e_score_correction_bias", torch::zeros({num_experts}), /*requires_grad=*/false);
  }
  // Registered under their global indices: HF names on every EP rank.
  auto holder = register_module("experts", std::make_shared<torch::nn::Module>());
  for (int64_t j = first_local; j < first_local + count; ++j) {
    // Expert 0 of layer 0 stands for all: the TP layout depends on neither index.
    local_experts.push_back(holder->register_module(
        std::to_string(j), QwenMLP(config, ep.enabled() ? TensorParallel{} : tp,
                                   config.moe.moe_intermediate_size,
                                   "model.layers.0.mlp.experts.0.gate_proj.weight")));
  }
  if (config.moe.n_shared_experts > 0) {
    shared_experts = register_module(
        "shared_experts",
        QwenMLP(config, tp, config.moe.moe_intermediate_size * config.moe.n_shared_experts,
                "model.layers.0.mlp.shared_experts.gate_proj.weight"));
  }
}

void QwenSparseMoeBlockImpl::attach_lora(const LoraOptions& options,
                                         const std::shared_ptr<const LoraSwitch>& on,
                                         const ModelConfig& config) {
  if (shared_experts) {
    shared_experts->attach_lora(options, on, config,
                                "model.layers.0.mlp.shared_experts.gate_proj.weight");
  }
  if (!options.experts) return;
  for (QwenMLP& expert : local_experts) {
    expert->attach_lora(options, on, config, "model.layers.0.mlp.experts.0.gate_proj.weight");
  }
}

torch::Tensor QwenSparseMoeBlockImpl::forward_replicated(const torch::Tensor& x,
                                                        const RouterChoice& choice,
                                                        const torch::Tensor& order,
                                                        const torch::Tensor& counts) {
  // The slots sorted by expert; this rank's experts' slots are one contiguous run.
  const int64_t* count = counts.data_ptr<int64_t>();
  const int64_t local = static_cast<int64_t>(local_experts.size());
  int64_t begin = 0, length = 0;
  for (int64_t e = 0; e < first_local; ++e) begin += count[e];
  for (int64_t e = first_local; e < first_local + local; ++e) length += count[e];
  const torch::Tensor mine = order.narrow(0, begin, length);
  const std::vector<int64_t> local_counts(count + first_local, count + first_local + local);
  const TensorParallel over_ep = TensorParallel::over(*ep.group);
  if (tp.enabled()) {
    // Training with EP over the TP group: every slot's expert output is completed by
    // the all-reduce BEFORE the routing weights multiply it, so that the router's
    // gradient (and the input's, summed by the copy's backward) is the full one on
    // every rank, as under TP alone.
    const torch::Tensor input = copy_to_tp_region(x, over_ep);
    const torch::Tensor outputs =
        run_local_experts(input.index_select(0, mine.div(top_k, "floor")), local_counts);
    const int64_t slots = order.size(0);
    const torch::Tensor sorted = torch::cat(
        {torch::zeros({begin, x.size(1)}, outputs.options()), outputs,
         torch::zeros({slots - begin - length, x.size(1)}, outputs.options())});
    const torch::Tensor expert_out = reduce_from_tp_region(sorted, over_ep);
    const torch::Tensor slot_weights = choice.weights.reshape({-1, 1}).index_select(0, order);
    torch::Tensor out =
        torch::zeros_like(x).index_add(0, order.div(top_k, "floor"),
                                       (expert_out * slot_weights).to(x.scalar_type()));
    if (shared_experts) out = out + shared_experts(x);
    return out;
  }
  // A rollout instance (no gradient): each rank weights its own experts' outputs and one
  // all-reduce of [T, C] sums them.
  const torch::Tensor slot_tokens = mine.div(top_k, "floor");
  const torch::Tensor outputs = run_local_experts(x.index_select(0, slot_tokens), local_counts);
  const torch::Tensor slot_weights = choice.weights.reshape({-1, 1}).index_select(0, mine);
  const torch::Tensor partial =
      torch::zeros_like(x).index_add(0, slot_tokens, (outputs * slot_weights).to(x.scalar_type()));
  // The other ranks' experts' outputs complete it (backward: the gradient as it is).
  torch::Tensor out = reduce_from_tp_region(partial, over_ep);
  if (shared_experts) out = out + shared_experts(x);
  return out;
}

RouterChoice QwenSparseMoeBlockImpl::route(const torch::Tensor& x) {
  if (scoring == RouterScoring::kSoftmax) return route_top_k(gate(x), top_k, norm_topk_prob);
  // DeepSeek-V3 scores in fp32 whatever the model's dtype (fp64 stays fp64).
  const auto dtype = x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  const torch::Tensor logits = torch::nn::functional::linear(x.to(dtype), gate->weight.to(dtype));
  return route_grouped_sigmoid(logits, e_score_correction_bias, grouped);
}

QwenMLP& QwenSparseMoeBlockImpl::expert(int64_t index) {
  check_input(index >= first_local && index < first_local + static_cast<int64_t>(local_experts.size()),
              "expert " + std::to_string(index) + " is not held by this EP rank", "MoE layer");
  return local_experts[static_cast<size_t>(index - first_local)];
}

torch::Tensor QwenSparseMoeBlockImpl::run_local_experts(const torch::Tensor& rows,
                                                        const std::vector<int64_t>& counts) {
  std::vector<torch::Tensor> outputs;
  int64_t begin = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == 0) continue;
    outputs.push_back(local_experts[i]->forward_local(rows.narrow(0, begin, counts[i])));
    begin += counts[i];
  }
  // No rows: an empty result still tied to `rows`, so that an expert-parallel
  // backward reaches this rank's all-to-all like every other rank's.
  return outputs.empty() ? rows.narrow(0, 0, 0) * 0 : torch::cat(outputs);
}

torch::Tensor QwenSparseMoeBlockImpl::run_experts_across_ranks(const torch::Tensor& rows,
                                                               const torch::Tensor& counts) {
  const int64_t local = static_cast<int64_t>(local_experts.size());
  ProcessGroupHandle group = *ep.group;
  // counts_from[s][e]: rows rank s routes to expert e.
  const std::vector<torch::Tensor> counts_from = group.all_gather(counts);
  std::vector<int64_t> send(static_cast<size_t>(ep.size), 0), recv(send);
  const int64_t* mine = counts.data_ptr<int64_t>();
  for (int64_t e = 0; e < num_experts; ++e) send[static_cast<size_t>(e / local)] += mine[e];
  for (int s = 0; s < ep.size; ++s) {
    const int64_t* theirs = counts_from[static_cast<size_t>(s)].data_ptr<int64_t>();
    for (int64_t i = 0; i < local; ++i) recv[static_cast<size_t>(s)] += theirs[first_local + i];
  }
  const torch::Tensor received = all_to_all_rows(rows, send, recv, ep);

  // Received rows come source by source, each source's rows by expert; put them expert
  // by expert so that each local expert runs one GEMM chain over all of its rows.
  std::vector<torch::Tensor> segments;
  std::vector<int64_t> per_expert(static_cast<size_t>(local), 0);
  for (int64_t i = 0; i < local; ++i) {
    int64_t source_start = 0;
    for (int s = 0; s < ep.size; ++s) {
      const int64_t* theirs = counts_from[static_cast<size_t>(s)].data_ptr<int64_t>();
      int64_t start = source_start;
      for (int64_t j = 0; j < i; ++j) start += theirs[first_local + j];
      const int64_t n = theirs[first_local + i];
      if (n > 0) segments.push_back(torch::arange(start, start + n, torch::kLong));
      per_expert[static_cast<size_t>(i)] += n;
      source_start += recv[static_cast<size_t>(s)];
    }
  }
  const torch::Tensor by_expert =
      segments.empty() ? torch::zeros({0}, torch::kLong) : torch::cat(segments);
  const torch::Tensor outputs =
      run_local_experts(received.index_select(0, by_expert.to(received.device())), per_expert);
  const torch::Tensor back_order = std::get<1>(by_expert.sort()).to(received.device());
  return all_to_all_rows(outputs.index_select(0, back_order), recv, send, ep);
}

torch::Tensor QwenSparseMoeBlockImpl::forward(const torch::Tensor& x, MoeRoutingLog* log) {
  const int64_t tokens = x.size(0);
  // Under EP every rank joins the collectives, tokens or not.
  if (tokens == 0 && !ep.enabled()) return torch::zeros_like(x);
  RouterChoice choice = route(x);
  const torch::Tensor replay =
      log != nullptr ? log->replay_of(static_cast<int64_t>(log->layers.size())) : torch::Tensor();
  if (replay.defined()) {
    check_input(scoring == RouterScoring::kSoftmax,
                "replays softmax (Qwen3-MoE) routers only, not group-limited sigmoid ones",
                "algorithm.rollout_correction.routing_replay");
    check_input(replay.size(0) == tokens, "needs one replayed row per token", "routing replay");
    choice = replay_top_k(choice, replay, norm_topk_prob);
  }
  if (log != nullptr) log->layers.push_back(layer_routing(choice));

  // Group the T*k (token, expert) slots by expert; slot s belongs to token s / k.
  const torch::Tensor slot_experts = choice.experts.reshape(-1);
  const torch::Tensor order = std::get<1>(slot_experts.sort(std::optional<bool>(true), /*dim=*/0));
  const torch::Tensor slot_tokens = order.div(top_k, "floor");
  const torch::Tensor counts =
      torch::bincount(slot_experts, /*weights=*/{}, num_experts).to(torch::kCPU).contiguous();

  if (ep.enabled() && ep.replicated_tokens) return forward_replicated(x, choice, order, counts);
  const torch::Tensor grouped = copy_to_tp_region(x, tp).index_select(0, slot_tokens);
  torch::Tensor expert_out;
  if (ep.enabled()) {
    expert_out = run_experts_across_ranks(grouped, counts);
  } else {
    const int64_t* count = counts.data_ptr<int64_t>();
    expert_out = run_local_experts(grouped, std::vector<int64_t>(count, count + num_experts));
  }
  expert_out = reduce_from_tp_region(expert_out, tp);
  const torch::Tensor slot_weights = choice.weights.reshape({-1, 1}).index_select(0, order);
  // DeepSeek's weights are fp32: weight in fp32, then back to the model's dtype.
  torch::Tensor out = torch::zeros({tokens, x.size(1)}, x.options())
                          .index_add(0, slot_tokens, (expert_out * slot_weights).to(x.scalar_type()));
  if (shared_experts) out = out + shared_experts(x);
  return out;
}

}  // namespace aspen::model
