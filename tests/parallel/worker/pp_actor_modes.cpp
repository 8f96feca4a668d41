// Pipeline-parallel actor rank program:
//   pp_actor CASE[@LAYOUT]...
//                     for each CASE builds the same seeded 3-layer model whole (one
//                     process, on every rank, no collectives) and as this rank's stage,
//                     and runs through both: old log-probs (compute_logprobs: the
//                     forward-only pass over the stages), reference log-probs (a
//                     ReferencePolicy copy of the stage), then one ActorTrainer update of
//                     two AdamW steps (mini-batches of 4 rows, several balanced
//                     micro-batches each in 1F1B order), gradient clipping active and a
//                     KL term in the loss. Every stage must report the one process's
//                     log-probs, policy loss, KL loss, grad norm and step count, and hold
//                     its parameters as the one process updated them, within the TP
//                     tests' tolerances. Prints "rank R pp_actor CASE[@LAYOUT] ok".
//     qwen3_dense, qwen2_tied, qwen3_moe (pp_cases.h); the MoE case trains with a
//                     load-balancing loss (router_aux_loss_coef 0.5) and also checks its
//                     value and the router load metrics
//   LAYOUT (pp_grid.h): none - the world is the pipeline group, stage = rank;
//     tpN             stages of N tensor-parallel ranks (PP x TP): each rank holds its
//                     TP shard of its stage's parameters, checked against the shard of
//                     the one-process update;
//     dpN             N pipelines training their balanced shares of the batch (DP x PP):
//                     the one process trains each global mini-batch (the union of the
//                     ranks' shares, actor_dp_problem.h) as one optimizer step;
//     epN             as dpN with each stage's sparse layers' experts split over its N
//                     ranks (PP x EP, qwen3_moe): every rank holds its own experts as the
//                     one process updated them.
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "actor_dp_problem.h"
#include "aspen/model/expert_parallel_state.h"
#include "aspen/model/qwen_model.h"
#include "aspen/model/tp_layout.h"
#include "aspen/model/weights_init.h"
#include "aspen/parallel/pipeline_stages.h"
#include "aspen/train/actor.h"
#include "aspen/train/reference.h"
#include "aspen/util/error.h"
#include "pp_cases.h"
#include "pp_grid.h"
#include "support/tiny_model_configs.h"
#include "tensor_checks.h"
#include "worker_mode.h"

namespace aspen::testing {

using namespace aspen::model;
using namespace aspen::parallel;
using namespace aspen::train;
// Named, not anonymous: the unity build compiles this file with the other modes.
namespace pipeline_actor_check {

using namespace pipeline_cases;

ActorOptions actor_options() {
  ActorOptions options;
  // As tp_actor_modes.cpp: a large eps makes AdamW's step proportional to the (clipped)
  // gradient, so the weights reflect the clip scale.
  options.trainer.optimizer.eps = 1e-2;
  options.trainer.optimizer.lr = 1e-2;
  options.trainer.optimizer.weight_decay = 0.01;
  options.trainer.optimizer.max_grad_norm = 0.05;  // far below the norm: clipping acts
  options.trainer.max_tokens_per_micro_batch = 12;  // 2-4 micro-batches per mini-batch
  options.head.chunk_size = 7;
  return options;
}

// This rank's part of a one-process parameter: its TP shard under PP x TP.
torch::Tensor local_part(const torch::Tensor& full, const std::string& key,
                         const ModelConfig& config, const PpGrid& grid) {
  if (grid.kind != "tp") return full;
  return take_shard(full, qwen_shard_spec(key, config), grid.inner_rank, grid.inner_size, key);
}

// Each inner rank's rows: the balanced shares (dp), or under EP the first six rows to
// rank 0 and the rest to rank 1, so their micro-batch counts differ and the rank with
// fewer runs padding passes through the stages (expert_lockstep.h).
std::vector<std::vector<int64_t>> shares_of(const TrainBatch& batch, const PpGrid& grid) {
  if (grid.kind != "ep") return balanced_share_rows(batch, grid.inner_size);
  check_input(grid.inner_size == 2, "the uneven EP shares are for 2 ranks", "pp_actor ep");
  return {{0, 1, 2, 3, 4, 5}, {6, 7}};
}

// The global mini-batches those shares train on, step by step (as dp_global_steps).
std::vector<TrainBatch> global_steps(const TrainBatch& batch, const PpGrid& grid) {
  const int64_t n = batch.num_rows();
  std::vector<std::vector<int64_t>> steps(static_cast<size_t>(dp_steps_per_epoch(n, kDpMiniBatchRows)));
  for (const auto& share : shares_of(batch, grid)) {
    const auto local = dp_mini_batch_rows(static_cast<int64_t>(share.size()), n,
                                          kDpMiniBatchRows, false, 0, 0);
    for (size_t j = 0; j < local.size(); ++j) {
      for (int64_t i : local[j]) steps[j].push_back(share[static_cast<size_t>(i)]);
    }
  }
  std::vector<TrainBatch> out;
  for (const auto& rows : steps) out.push_back(select_rows(batch, rows));
  return out;
}

void run_case(ProcessGroupHandle& world, const std::string& spec) {
  const size_t at = spec.find('@');
  const std::string name = spec.substr(0, at);
  const PpGrid grid = make_pp_grid(world, at == std::string::npos ? "" : spec.substr(at + 1));
  const PipelineStages& pp = grid.pp;
  const std::string where = "pp_actor " + spec + " rank " + std::to_string(world.rank());
  const ModelConfig config = case_config(name, "pp_actor");
  QwenForCausalLM full(config);
  init_weights(full, /*seed=*/31, /*initializer_range=*/0.2);
  std::map<std::string, torch::Tensor> weights;
  for (const auto& [key, tensor] : full->hf_state()) weights[key] = tensor.detach().clone();
  TensorParallel tp;
  if (grid.kind == "tp") tp = TensorParallel::over(*grid.inner);
  ExpertParallel ep;
  if (grid.kind == "ep") ep = ExpertParallel::over(*grid.inner);
  QwenForCausalLM stage(config, tp, ep, pp);
  stage->load_state(weights, "whole weights");

  ActorOptions options = actor_options();
  ActorTrainer one(full, options);
  // EP ranks are data-parallel ranks whose experts are their own (actor.h).
  const bool own_rows = grid.kind == "dp" || grid.kind == "ep";
  if (own_rows) options.data_parallel.group = grid.inner;
  if (grid.kind == "ep") options.data_parallel.is_expert = is_expert_parameter;
  ActorTrainer many(stage, options);
  TrainBatch batch = seeded_batch(config.vocab_size);
  const TokenLogprobs old_one = one.compute_logprobs(batch, /*with_entropy=*/true);
  // The reference is a frozen copy of the stage: the same forward-only pass.
  ReferencePolicy reference_one(full, ReferenceOptions{});
  ReferencePolicy reference_many(stage, ReferenceOptions{});
  const torch::Tensor ref_one = reference_one.compute_logprobs(batch);
  // Old log-probs off the current ones, the reference further off: every term moves.
  // Seeded here: building a model draws from the global generator, and stages build
  // different modules.
  torch::manual_seed(24);
  batch.token_columns[columns::kOldLogprobs] = old_one.logprobs + 0.05 * torch::randn_like(ref_one);
  batch.token_columns[columns::kRefLogprobs] = ref_one + 0.1 * torch::randn_like(ref_one);
  // DP x PP: this pipeline's balanced share; its log-probs against the one process's.
  const TrainBatch local =
      own_rows ? select_rows(batch, shares_of(batch, grid).at(static_cast<size_t>(grid.inner_rank)))
                        : batch;
  const TokenLogprobs old_local = own_rows ? one.compute_logprobs(local, true) : old_one;
  const TokenLogprobs old_many = many.compute_logprobs(local, /*with_entropy=*/true);
  expect_close_to(old_many.logprobs, old_local.logprobs, "old log-probs", where, "one process");
  expect_close_to(old_many.entropy, old_local.entropy, "entropy", where, "one process");
  expect_close_to(reference_many.compute_logprobs(local), reference_one.compute_logprobs(local),
                  "reference log-probs", where, "one process");

  ActorUpdateOptions update;
  update.mini_batch_size = 4;  // two optimizer steps
  update.kl_coef = 0.1;
  // Not with own rows: the load-balancing loss is a product of per-forward sums, so it
  // depends on how rows are packed into micro-batches and ranks (actor.h).
  if (config.is_moe() && !own_rows) update.router_aux_loss_coef = 0.5;
  ActorMetrics want;
  if (own_rows) {
    // One process: each global mini-batch of the DP run as one step (kDpMiniBatchRows = 4).
    ActorUpdateOptions step = update;
    step.mini_batch_size = 0;
    std::vector<ActorMetrics> steps;
    for (const TrainBatch& b : global_steps(batch, grid)) {
      steps.push_back(one.update(b, step));
    }
    want = combine(steps);
  } else {
    want = one.update(batch, update);
  }
  const ActorMetrics got = many.update(local, update);
  check_input(want.steps == 2 && got.steps == 2 && got.skipped_steps == 0,
              "expected two optimizer steps, got " + std::to_string(got.steps), where);
  check_input(want.grad_norm > 10 * actor_options().trainer.optimizer.max_grad_norm,
              "the case must clip", where);
  // (DP packs each pipeline's share on its own: the counts need not match one process's.)
  check_input((own_rows || got.micro_batches == want.micro_batches) &&
                  got.micro_batches > 2,
              "micro-batches " + std::to_string(got.micro_batches) + ", one process " +
                  std::to_string(want.micro_batches),
              where);
  expect_near(got.grad_norm, want.grad_norm, "grad norm", where);
  expect_near(got.policy_loss, want.policy_loss, "policy loss", where);
  expect_near(got.kl_loss, want.kl_loss, "kl loss", where);
  expect_near(got.entropy, want.entropy, "entropy", where);
  expect_near(got.clip_frac, want.clip_frac, "clip fraction", where);
  if (config.is_moe() && !own_rows) {
    check_input(want.router_aux_loss > 0.0, "the MoE case has a load-balancing loss", where);
    expect_near(got.router_aux_loss, want.router_aux_loss, "load-balancing loss", where);
    expect_near(got.router_load_max, want.router_load_max, "router load max", where);
    expect_near(got.router_load_mean, want.router_load_mean, "router load mean", where);
  }
  std::map<std::string, torch::Tensor> updated;
  for (const auto& [key, tensor] : full->hf_state()) updated[key] = tensor.detach();
  int64_t held = 0;
  for (const auto& [key, tensor] : stage->hf_state()) {
    ++held;
    check_input(!torch::equal(tensor, local_part(weights.at(key), key, config, grid)),
                key + " did not move", where);
    expect_close_to(tensor, local_part(updated.at(key), key, config, grid), key + " after two steps",
                    where, "one process");
  }
  check_input(held > 0 && held < static_cast<int64_t>(updated.size()),
              "the stage holds " + std::to_string(held) + " of " + std::to_string(updated.size()) +
                  " parameters",
              where);
}

int run_pp_actor(ProcessGroupHandle& group, const std::vector<std::string>& cases) {
  for (const std::string& spec : cases) {
    run_case(group, spec);
    std::printf("rank %d pp_actor %s ok\n", group.rank(), spec.c_str());
    std::fflush(stdout);
  }
  return 0;
}

const RegisterWorkerMode kPpActor{{"pp_actor", "pp_actor CASE...", run_pp_actor}};

}  // namespace pipeline_actor_check
}  // namespace aspen::testing
