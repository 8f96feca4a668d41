// Expert-parallel rank program (EP group = the whole world):
//   ep_check  prints "rank R ep CASE ok" for each of:
//     all_to_all   all_to_all_rows forward and backward on hand-computable rows;
//     model        a seeded Qwen3-MoE built at EP = 1 (reference, every rank) and at
//                  EP = world (this rank's experts): each rank runs its OWN packed
//                  batch; the EP forward (hidden, log-probs) equals the reference on
//                  that batch, and after backward the summed non-expert gradients and
//                  the local experts' gradients equal the reference gradients of the
//                  sum of every rank's loss; then two AdamW steps on both leave the
//                  same weights.
//     rollout      the rollout engine over the EP model, every rank stepping the same
//                  requests (as the ranks of one instance do), generates the tokens and
//                  log-probs of the engine over the one-process model.
//     replicated_rollout  the same with ExpertParallel::replicated_tokens: no
//                  all-to-all, each rank its experts on their slots, one all-reduce.
//     tensor_times_expert  attention split by TP and the experts whole by EP over the
//                  same ranks (placement.train.ep = train.tp), every rank on the same
//                  batch: forward, every gradient (this rank's TP shard, or its whole
//                  experts) and two AdamW steps equal the one-process model's.
//     actor        ActorTrainer over the EP model, data-parallel over the same ranks,
//                  rank 0 with three micro-batches and the others with one (padding
//                  passes): log-probs, grad norm and updated weights equal one process
//                  updating on every row.
//     actor_replay the same with routing replay (R3): both replay the choices of a
//                  model whose routers were moved, and the EP actor's top-k mismatch
//                  to them is 0.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "aspen/model/expert_parallel_state.h"
#include "aspen/model/moe_routing.h"
#include "aspen/model/qwen_model.h"
#include "aspen/model/tp_layout.h"
#include "aspen/model/weights_init.h"
#include "aspen/parallel/shard_spec.h"
#include "aspen/train/actor.h"
#include "aspen/train/batch_rows.h"
#include "aspen/train/micro_batches.h"
#include "aspen/train/policy_logprobs.h"
#include "aspen/parallel/expert_parallel.h"
#include "aspen/util/error.h"
#include "paged_rollout_check.h"
#include "support/tiny_model_configs.h"
#include "worker_mode.h"

namespace aspen::testing {

using namespace aspen::model;
using namespace aspen::parallel;
using namespace aspen::train;
namespace {

void ep_expect(bool ok, const std::string& what, const std::string& where) {
  check_input(ok, what, where);
}

void ep_expect_close(const torch::Tensor& got, const torch::Tensor& want, const std::string& what,
                  const std::string& where) {
  ep_expect(got.sizes() == want.sizes(), what + ": shape " + c10::str(got.sizes()), where);
  const double diff = got.numel() == 0 ? 0.0 : (got - want).abs().max().item<double>();
  ep_expect(torch::allclose(got, want, 1e-4, 2e-5),
         what + " differs from EP = 1 by up to " + std::to_string(diff), where);
}

// Rank r sends (r + d + 1) rows of value 10 r + d to rank d.
void check_all_to_all(const ExpertParallel& ep) {
  const std::string where = "ep_check all_to_all";
  std::vector<int64_t> send, recv;
  std::vector<torch::Tensor> rows;
  for (int d = 0; d < ep.size; ++d) {
    send.push_back(ep.rank + d + 1);
    recv.push_back(d + ep.rank + 1);
    rows.push_back(torch::full({send.back(), 2}, 10.0f * ep.rank + d));
  }
  const torch::Tensor x = torch::cat(rows).requires_grad_(true);
  const torch::Tensor y = all_to_all_rows(x, send, recv, ep);
  int64_t at = 0;
  for (int s = 0; s < ep.size; ++s) {
    const torch::Tensor part = y.narrow(0, at, recv[static_cast<size_t>(s)]);
    ep_expect(torch::equal(part, torch::full_like(part, 10.0f * s + ep.rank)),
           "rows from rank " + std::to_string(s), where);
    at += recv[static_cast<size_t>(s)];
  }
  // Gradient of y = its own value + 1000: each row's gradient returns to its sender.
  y.backward(y.detach() + 1000.0f);
  ep_expect(torch::equal(x.grad(), x.detach() + 1000.0f), "gradients come back to their rows", where);
}

ModelConfig ep_config() { return tiny_parallel_moe_config(/*layers=*/3); }

std::map<std::string, torch::Tensor> seeded_weights(const ModelConfig& config) {
  QwenForCausalLM model(config);
  init_weights(model, /*seed=*/11, /*initializer_range=*/0.2);
  std::map<std::string, torch::Tensor> weights;
  for (const auto& [name, param] : model->hf_state()) weights[name] = param.detach().clone();
  return weights;
}

struct Batch {
  torch::Tensor ids, cu;
};

// Rank-specific: every rank routes its own tokens.
Batch rank_batch(int rank, int64_t vocab) {
  const std::vector<int64_t> lengths = {5 + rank, 3, 7 - rank};
  std::vector<int64_t> offsets = {0};
  for (int64_t n : lengths) offsets.push_back(offsets.back() + n);
  torch::manual_seed(100 + rank);
  return {torch::randint(vocab, {offsets.back()}, torch::kLong), torch::tensor(offsets)};
}

torch::Tensor loss_of(QwenForCausalLM& model, const Batch& batch) {
  const torch::Tensor lp = model->token_logprobs(batch.ids, batch.cu).logprobs;
  return (lp * torch::linspace(-1.0, 1.5, lp.size(0))).sum();
}

bool is_expert(const std::string& name) { return name.find(".mlp.experts.") != std::string::npos; }

void check_model(const ExpertParallel& ep) {
  const std::string where = "ep_check model";
  const ModelConfig config = ep_config();
  const auto weights = seeded_weights(config);
  QwenForCausalLM reference(config);
  reference->load_state(weights, "seeded");
  QwenForCausalLM sharded(config, TensorParallel{}, ep);
  sharded->load_state(weights, "seeded");  // other ranks' experts are skipped
  const int64_t local = config.moe.num_experts / ep.size;
  for (const auto& [name, param] : sharded->hf_state()) {
    if (!is_expert(name)) continue;
    const int64_t index = std::stoll(name.substr(name.find(".experts.") + 9));
    ep_expect(index / local == ep.rank, "rank holds expert " + std::to_string(index), where);
  }

  std::vector<Batch> batches;
  for (int r = 0; r < ep.size; ++r) batches.push_back(rank_batch(r, config.vocab_size));
  const Batch& mine = batches[static_cast<size_t>(ep.rank)];
  {
    torch::NoGradGuard no_grad;
    ep_expect_close(sharded->forward(mine.ids, mine.cu), reference->forward(mine.ids, mine.cu),
                 "hidden", where);
  }
  torch::optim::AdamW ref_opt(reference->parameters(), torch::optim::AdamWOptions(1e-2));
  torch::optim::AdamW ep_opt(sharded->parameters(), torch::optim::AdamWOptions(1e-2));
  ProcessGroupHandle group = *ep.group;
  for (int step = 0; step < 2; ++step) {
    ref_opt.zero_grad();
    ep_opt.zero_grad();
    torch::Tensor ref_loss = torch::zeros({});
    for (const Batch& b : batches) ref_loss = ref_loss + loss_of(reference, b);
    ref_loss.backward();
    loss_of(sharded, mine).backward();
    // Data parallelism over the EP ranks for everything but the experts.
    auto ref_params = reference->named_parameters();
    for (auto& item : sharded->named_parameters()) {
      torch::Tensor& grad = item.value().mutable_grad();
      const torch::Tensor& want = ref_params[item.key()].grad();
      if (!grad.defined()) grad = torch::zeros_like(item.value());
      if (!is_expert(item.key())) group.all_reduce_sum(grad);
      ep_expect_close(grad, want.defined() ? want : torch::zeros_like(grad),
                   "step " + std::to_string(step) + " gradient of " + item.key(), where);
    }
    ref_opt.step();
    ep_opt.step();
  }
  auto ref_params = reference->named_parameters();
  for (const auto& item : sharded->named_parameters()) {
    ep_expect_close(item.value(), ref_params[item.key()], "after two steps: " + item.key(), where);
  }
}

// The gradient or weight `want` of the one-process model as this TP x EP rank holds it.
torch::Tensor as_held(const std::string& name, const torch::Tensor& want, const ModelConfig& config,
                      const TensorParallel& tp) {
  if (is_expert(name)) return want;  // whole on its one rank
  return take_shard(want, qwen_shard_spec(name, config), tp.rank, tp.size, name);
}

void check_tensor_times_expert(ProcessGroupHandle& group) {
  const std::string where = "ep_check tensor_times_expert";
  const ModelConfig config = ep_config();
  const auto weights = seeded_weights(config);
  QwenForCausalLM reference(config);
  reference->load_state(weights, "seeded");
  const TensorParallel tp = TensorParallel::over(group);
  QwenForCausalLM sharded(config, tp, ExpertParallel::over(group, /*replicated_tokens=*/true));
  sharded->load_state(weights, "seeded");
  const Batch batch = rank_batch(0, config.vocab_size);  // the same tokens on every rank
  {
    torch::NoGradGuard no_grad;
    ep_expect_close(sharded->forward(batch.ids, batch.cu), reference->forward(batch.ids, batch.cu),
                    "hidden", where);
  }
  torch::optim::AdamW ref_opt(reference->parameters(), torch::optim::AdamWOptions(1e-2));
  torch::optim::AdamW tp_opt(sharded->parameters(), torch::optim::AdamWOptions(1e-2));
  for (int step = 0; step < 2; ++step) {
    ref_opt.zero_grad();
    tp_opt.zero_grad();
    loss_of(reference, batch).backward();
    loss_of(sharded, batch).backward();
    auto ref_params = reference->named_parameters();
    for (auto& item : sharded->named_parameters()) {
      torch::Tensor& grad = item.value().mutable_grad();
      const torch::Tensor& want = ref_params[item.key()].grad();
      if (!grad.defined()) grad = torch::zeros_like(item.value());
      ep_expect_close(grad,
                      want.defined() ? as_held(item.key(), want, config, tp)
                                     : torch::zeros_like(grad),
                      "step " + std::to_string(step) + " gradient of " + item.key(), where);
    }
    ref_opt.step();
    tp_opt.step();
  }
  auto ref_params = reference->named_parameters();
  for (const auto& item : sharded->named_parameters()) {
    ep_expect_close(item.value(), as_held(item.key(), ref_params[item.key()], config, tp),
                    "after two steps: " + item.key(), where);
  }
}

void check_rollout(const ExpertParallel& ep) {
  const ModelConfig config = ep_config();
  const auto weights = seeded_weights(config);
  QwenForCausalLM reference(config);
  reference->load_state(weights, "seeded");
  QwenForCausalLM sharded(config, TensorParallel{}, ep);
  sharded->load_state(weights, "seeded");
  check_paged_rollout_matches(reference, sharded, "ep_check rollout");
}

// The actor's update across EP ranks whose shares pack into different numbers of
// micro-batches (rank 0: three rows, three micro-batches; the others: one row, one):
// the padding passes keep every rank in the others' collectives, in the log-prob pass
// and in the update, and the result equals one process updating on every row.
// The rollout's expert choices ([R, S * k], routing_replay_log's column) for `batch`
// under `weights` with every router moved, so that they differ from the trainer's own.
torch::Tensor moved_router_routing(const ModelConfig& config,
                                   const std::map<std::string, torch::Tensor>& weights,
                                   const TrainBatch& batch) {
  QwenForCausalLM rollout(config);
  rollout->load_state(weights, "seeded");
  torch::NoGradGuard no_grad;
  torch::manual_seed(3);  // the same on every rank
  for (auto& item : rollout->named_parameters()) {
    if (item.key().find(".mlp.gate.weight") != std::string::npos) {
      item.value().add_(torch::randn_like(item.value()) * 5.0);
    }
  }
  std::vector<int64_t> rows(static_cast<size_t>(batch.num_rows()));
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>(i);
  const MicroBatch mb = pack_rows(batch, rows, torch::kCPU);
  MoeRoutingLog log;
  response_logprobs(rollout, mb, LogprobHeadOptions{}, false, &log);
  std::vector<torch::Tensor> layers;
  for (const LayerRouting& layer : log.layers) {
    layers.push_back(layer.experts.index_select(0, mb.hidden_index));
  }
  return torch::cat(layers, 1).to(torch::kInt32);
}

// With `replay` (routing replay, R3) every forward of both the EP actor and the
// one-process reference routes the response tokens as moved_router_routing says, and
// the EP actor reports no top-k mismatch.
void check_actor(ProcessGroupHandle& group, const ExpertParallel& ep, bool replay) {
  const std::string where = replay ? "ep_check actor_replay" : "ep_check actor";
  const ModelConfig config = ep_config();
  const auto weights = seeded_weights(config);
  TrainBatch all;
  for (int64_t row = 0; row < 2 + ep.size; ++row) {
    std::vector<int64_t> prompt, response;
    for (int64_t t = 0; t < 4 + row % 3; ++t) prompt.push_back((7 * row + 3 * t + 1) % config.vocab_size);
    for (int64_t t = 0; t < 6; ++t) response.push_back((5 * row + 11 * t + 2) % config.vocab_size);
    all.prompts.push_back(prompt);
    all.responses.push_back(response);
  }
  ActorOptions options;
  // AdamW's first step moves every element by about lr whatever its gradient's size, so
  // an element whose gradient is near zero can move by a rounding-level difference
  // times lr: lr 1e-3 keeps that under the tolerance (1e-2 gave 1.2e-4), while a wrong
  // gradient still moves weights by 2e-3.
  options.trainer.optimizer.lr = 1e-3;
  options.trainer.max_tokens_per_micro_batch = 12;  // one row per micro-batch
  QwenForCausalLM full(config);
  full->load_state(weights, "seeded");
  ActorTrainer reference(full, options);
  if (replay) {
    all.token_columns[columns::kBehaviourRoutedExperts] = moved_router_routing(config, weights, all);
  }
  const torch::Tensor old = reference.compute_logprobs(all, false, replay).logprobs;
  all.token_columns[columns::kOldLogprobs] = old + 0.1;
  all.token_columns[columns::kAdvantages] = torch::cos(torch::arange(old.numel(), old.options()));
  std::vector<int64_t> mine;
  if (ep.rank == 0) {
    mine = {0, 1, 2};
  } else {
    mine = {2 + ep.rank};
  }
  const TrainBatch share = select_rows(all, mine);

  QwenForCausalLM sharded(config, TensorParallel{}, ep);
  sharded->load_state(weights, "seeded");
  ActorOptions ep_options = options;
  ep_options.data_parallel.group = group;  // DP = EP here: every expert on one rank
  ep_options.data_parallel.is_expert = is_expert_parameter;
  ActorTrainer actor(sharded, ep_options);
  const torch::Tensor local_old = actor.compute_logprobs(share, false, replay).logprobs;
  // The reference's log-probs of these rows (the column is them + 0.1).
  ep_expect_close(local_old, share.token_columns.at(columns::kOldLogprobs) - 0.1,
                  "log-probs of this rank's rows", where);
  ActorUpdateOptions update;
  update.routing_replay = replay;
  const ActorMetrics got = actor.update(share, update);
  const ActorMetrics want = reference.update(all, update);
  if (replay) {
    ep_expect(got.router_topk_compared > 0 && got.router_topk_mismatch == 0.0,
              "top-k mismatch " + std::to_string(got.router_topk_mismatch) + " over " +
                  std::to_string(got.router_topk_compared),
              where);
  }
  ep_expect(std::abs(got.grad_norm - want.grad_norm) <= 1e-4 * std::max(1.0, want.grad_norm),
            "grad norm " + std::to_string(got.grad_norm) + " vs " + std::to_string(want.grad_norm),
            where);
  auto ref_params = full->named_parameters();
  for (const auto& item : sharded->named_parameters()) {
    ep_expect_close(item.value().detach(), ref_params[item.key()].detach(),
                    "after the update: " + item.key(), where);
  }
}

int ep_check(ProcessGroupHandle& group, const std::vector<std::string>&) {
  const ExpertParallel ep = ExpertParallel::over(group);
  check_all_to_all(ep);
  std::printf("rank %d ep all_to_all ok\n", ep.rank);
  check_model(ep);
  std::printf("rank %d ep model ok\n", ep.rank);
  check_rollout(ep);
  std::printf("rank %d ep rollout ok\n", ep.rank);
  // A rollout instance's ranks step one batch: replicated tokens, no all-to-all.
  check_rollout(ExpertParallel::over(group, /*replicated_tokens=*/true));
  std::printf("rank %d ep replicated_rollout ok\n", ep.rank);
  check_tensor_times_expert(group);
  std::printf("rank %d ep tensor_times_expert ok\n", ep.rank);
  check_actor(group, ep, /*replay=*/false);
  std::printf("rank %d ep actor ok\n", ep.rank);
  check_actor(group, ep, /*replay=*/true);
  std::printf("rank %d ep actor_replay ok\n", ep.rank);
  return 0;
}

const RegisterWorkerMode kEpCheck({"ep_check", "ep_check", ep_check});

}  // namespace
}  // namespace aspen::testing
