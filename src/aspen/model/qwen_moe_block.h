// Sparse mixture-of-experts MLP of a Qwen3-MoE or DeepSeek-V3 decoder layer
// (transformers' Qwen3MoeSparseMoeBlock / DeepseekV3MoE):
//   (w, e) = router(gate(x))                      (model/moe_routing.h)
//   out[t] = sum_j w[t, j] * expert_{e[t, j]}(x[t])  [+ shared_experts(x[t])]
// where every expert is a gated MLP (qwen_mlp.h) of width moe_intermediate_size. The
// router is Qwen3-MoE's softmax top-k, or DeepSeek-V3's sigmoid group-limited top-k
// (config.moe.scoring): its logits are then computed in fp32, as transformers does,
// and it has a bias that steers only the choice (gate.e_score_correction_bias, a
// parameter that never trains: requires_grad false - DeepSeek's aux-loss-free bias
// update is a pre-training device, and RL post-training keeps it fixed, as verl does).
// DeepSeek-V3's shared experts are one dense gated MLP of width
// n_shared_experts * moe_intermediate_size that every token goes through.
//
// Kernel: tokens are grouped by expert (one stable sort of the T*k choices), so each
// expert with work runs ONE gate/up/down GEMM chain over all of its tokens - no loop
// over tokens, and experts no token chose cost nothing. The combine is one
// index_add. Composed ops only, so forward and backward run on any device.
//
// Shapes: T = tokens, C = hidden_size, E = num_experts, k = num_experts_per_tok,
// I = moe_intermediate_size. forward: x [T, C] -> [T, C].
// Parameters (HF names under "mlp."): gate.weight [E, C] (the router, no bias),
// experts.{j}.{gate,up}_proj.weight [I, C], experts.{j}.down_proj.weight [C, I];
// DeepSeek-V3 adds gate.e_score_correction_bias [E] and shared_experts.* [n*I, C] /
// [C, n*I].
// Tensor parallelism (tp.size = t > 1): the router is replicated; every expert is
// column- then row-parallel over I/t columns (tp_layout.h). The experts' partial
// outputs are summed over ranks (one all-reduce of the [T*k, C] grouped rows) before
// the routing weights multiply them, so the router's gradient is the full one on
// every rank.
// Expert parallelism (ep.size = p > 1, parallel/expert_parallel.h): this rank holds
// only experts [rank*E/p, (rank+1)*E/p) (registered under their global HF indices) and
// the others live on the other EP ranks, which route their own tokens. The grouped
// rows go to their experts' ranks by one all-to-all (after an all-gather of the
// per-expert counts), each local expert runs one GEMM chain over the rows every rank
// sent it, and a second all-to-all brings the outputs back; backward reverses both.
// Every EP rank must run every forward (and backward) together, with or without
// tokens. With replicated tokens (ExpertParallel::replicated_tokens: a rollout instance
// whose ranks step one batch) there is no all-to-all: each rank runs its experts on the
// slots routed to them, and one all-reduce sums the partial outputs.
// TP and EP together (training with placement.train.ep = train.tp): the EP group must be
// the TP group with replicated tokens. Attention and shared experts are split by TP, the
// routed experts are whole on one rank each; each rank runs its experts on their slots
// and one all-reduce of the [T*k, C] slot outputs completes them before the routing
// weights apply (the input's gradient summed over the group by the copy's backward), so
// every gradient is the one-process one. Any other combination is refused.
// Routing record: with a non-null `log`, forward appends this layer's routing
// statistics (for the load-balancing loss).
// Thread safety: forward mutates nothing but `log`.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "aspen/io/hf_config.h"
#include "aspen/model/imports.h"
#include "aspen/model/moe_routing.h"
#include "aspen/model/qwen_mlp.h"
#include "aspen/parallel/expert_parallel.h"
#include "aspen/parallel/tensor_parallel.h"

namespace aspen::model {

struct QwenSparseMoeBlockImpl : torch::nn::Module {
  explicit QwenSparseMoeBlockImpl(const ModelConfig& config, const TensorParallel& tp = {},
                                  const ExpertParallel& ep = {});

  torch::Tensor forward(const torch::Tensor& x, MoeRoutingLog* log = nullptr);

  // LoRA (model/lora.h) on the shared experts' targeted projections, and on every
  // local routed expert's when options.experts. The router never gets an adapter.
  void attach_lora(const LoraOptions& options, const std::shared_ptr<const LoraSwitch>& on,
                   const ModelConfig& config);

  // Expert `index` (global) if this rank holds it; aspen::Error otherwise.
  QwenMLP& expert(int64_t index);

  int64_t num_experts = 0;
  int64_t first_local = 0;  // global index of local_experts[0]
  int64_t top_k = 0;
  bool norm_topk_prob = false;
  RouterScoring scoring = RouterScoring::kSoftmax;
  GroupLimitedRouting grouped;  // kSigmoidGroupLimited's options
  torch::nn::Linear gate{nullptr};  // the router [E, C], replicated
  torch::Tensor e_score_correction_bias;  // [E], kSigmoidGroupLimited only (frozen)
  std::vector<QwenMLP> local_experts;
  QwenMLP shared_experts{nullptr};  // DeepSeek-V3 with n_shared_experts > 0
  TensorParallel tp;
  ExpertParallel ep;

 private:
  // Rows grouped by local expert (counts[i] rows for local expert i) -> their outputs.
  torch::Tensor run_local_experts(const torch::Tensor& rows, const std::vector<int64_t>& counts);
  // Rows grouped by global expert (counts over all E) -> their outputs, through the
  // experts' ranks.
  torch::Tensor run_experts_across_ranks(const torch::Tensor& rows, const torch::Tensor& counts);
  RouterChoice route(const torch::Tensor& x);
  // Expert parallelism over replicated tokens (ExpertParallel::replicated_tokens): this
  // rank's experts on their slots (`order`: slots sorted by expert, `counts` per
  // expert), summed over the EP group.
  torch::Tensor forward_replicated(const torch::Tensor& x, const RouterChoice& choice,
                                   const torch::Tensor& order, const torch::Tensor& counts);
};
TORCH_MODULE(QwenSparseMoeBlock);

}  // namespace aspen::model
