// The data-parallel trainer equivalence problem shared by aspen_dist_worker (each rank
// trains the actor or critic on its balanced share, pipeline/dp_shares.h) and the test
// (the in-process reference). A tiny seeded Qwen, one fixed global batch of 8 rows with
// different lengths and advantages, a global mini-batch of 4 rows (2 optimizer steps
// per update) and a small micro-batch budget (several micro-batches per local step).
// One long row makes the token-balanced shares unequal in rows (3 vs 5) and tokens, so
// local token OR row denominators give each rank a different gradient scale - which
// AdamW, being scale-invariant, would not reveal if the scale were uniform.
//
// The reference is one process without a group that trains, step by step, on the
// UNION of the ranks' local mini-batches (dp_mini_batches.h): exactly the global
// mini-batches DP trains on. Each of its steps is an update() of one mini-batch; its
// metrics are combined the way one update() combines its steps.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "aspen/pipeline/dp_shares.h"
#include "aspen/train/actor.h"
#include "aspen/train/batch_rows.h"
#include "aspen/train/critic.h"
#include "aspen/train/dp_mini_batches.h"
#include "train/train_fixtures.h"

namespace aspen::testing {

using namespace aspen::parallel;
using namespace aspen::pipeline;
using namespace aspen::train;

// actor: token-mean loss with KL and entropy terms (token denominators);
// actor_seq: seq-mean-token-mean (row denominators); actor_bf16: bf16 compute (master
// grads all-reduced after backward, no overlap); critic: the value trainer.
enum class DpKind { kActor, kActorSeq, kActorBf16, kCritic };

inline DpKind parse_dp_kind(const std::string& name) {
  if (name == "actor") return DpKind::kActor;
  if (name == "actor_seq") return DpKind::kActorSeq;
  if (name == "actor_bf16") return DpKind::kActorBf16;
  if (name == "critic") return DpKind::kCritic;
  throw std::invalid_argument("unknown kind " + name + " (actor|actor_seq|actor_bf16|critic)");
}

constexpr int64_t kDpMiniBatchRows = 4;

// The global batch, with every column both trainers read. Old log-probs come from the
// initial model (every process computes them on the whole batch, identically), shifted
// so that some ratios clip.
inline TrainBatch dp_global_batch() {
  TrainBatch batch =
      tiny_batch({{3, 12}, {2, 2}, {4, 3}, {1, 1}, {5, 4}, {2, 2}, {3, 3}, {2, 2}});
  ActorTrainer initial(tiny_model(31), {});
  const torch::Tensor current = initial.compute_logprobs(batch).logprobs;
  const torch::Tensor t = torch::arange(current.size(0), current.options());
  batch.token_columns[columns::kOldLogprobs] = current + 0.3 * torch::sin(t * 1.7);
  batch.token_columns[columns::kRefLogprobs] = current + 0.2 * torch::cos(t);
  batch.token_columns[columns::kAdvantages] = torch::cos(t * 0.9) + 0.2;
  batch.token_columns[columns::kValues] = 0.1 * torch::sin(t * 0.4);
  batch.token_columns[columns::kReturns] = 0.5 + 0.3 * torch::cos(t * 0.6);
  return batch;
}

inline TrainerOptions dp_trainer_options(DpKind kind) {
  TrainerOptions options;
  options.optimizer.lr = 1e-2;
  options.optimizer.max_grad_norm = 0.05;  // clipping must see the GLOBAL gradient norm
  options.max_tokens_per_micro_batch = 12;
  if (kind == DpKind::kActorBf16) options.compute_dtype = torch::kBFloat16;
  return options;
}

inline ActorUpdateOptions dp_actor_update(DpKind kind, int64_t mini_batch_size) {
  ActorUpdateOptions update;
  update.mini_batch_size = mini_batch_size;
  update.kl_coef = 0.1;
  update.entropy_coef = 0.01;
  if (kind == DpKind::kActorSeq) update.policy.agg.mode = AggMode::kSeqMeanTokenMean;
  return update;
}

inline CriticUpdateOptions dp_critic_update(int64_t mini_batch_size) {
  CriticUpdateOptions update;
  update.mini_batch_size = mini_batch_size;
  return update;
}

// Result of a run: final trainable parameters, metrics per update (a row each:
// actor  [policy_loss, kl_loss, entropy, clip_frac, approx_kl, grad_norm, lr, steps,
//         skipped_steps, tokens]; critic [value_loss, clip_frac, grad_norm, lr, steps,
//         skipped_steps]) and buckets all-reduced during backward.
struct DpRun {
  std::vector<torch::Tensor> params;
  torch::Tensor metrics;  // [updates, K] fp64
  int64_t buckets_overlapped = 0;
};

inline std::vector<double> metric_row(const ActorMetrics& m) {
  return {m.policy_loss, m.kl_loss,  m.entropy, m.clip_frac, m.approx_kl,
          m.grad_norm,   m.lr,       static_cast<double>(m.steps),
          static_cast<double>(m.skipped_steps), static_cast<double>(m.tokens)};
}

inline std::vector<double> metric_row(const CriticMetrics& m) {
  return {m.value_loss, m.clip_frac, m.grad_norm, m.lr, static_cast<double>(m.steps),
          static_cast<double>(m.skipped_steps)};
}

// Combines one-step updates as one multi-step update does (means over steps).
inline ActorMetrics combine(const std::vector<ActorMetrics>& steps) {
  ActorMetrics out;
  for (const auto& m : steps) {
    out.policy_loss += m.policy_loss;
    out.kl_loss += m.kl_loss;
    out.entropy += m.entropy;
    out.clip_frac += m.clip_frac;
    out.approx_kl += m.approx_kl;
    out.grad_norm += m.grad_norm * static_cast<double>(m.steps);
    if (m.steps > 0) out.lr = m.lr;
    out.steps += m.steps;
    out.skipped_steps += m.skipped_steps;
    out.tokens += m.tokens;
  }
  const double attempts = static_cast<double>(out.steps + out.skipped_steps);
  for (double* v : {&out.policy_loss, &out.kl_loss, &out.entropy, &out.clip_frac, &out.approx_kl}) {
    *v /= attempts;
  }
  if (out.steps > 0) out.grad_norm /= static_cast<double>(out.steps);
  return out;
}

inline CriticMetrics combine(const std::vector<CriticMetrics>& steps) {
  CriticMetrics out;
  for (const auto& m : steps) {
    out.value_loss += m.value_loss;
    out.clip_frac += m.clip_frac;
    out.grad_norm += m.grad_norm * static_cast<double>(m.steps);
    if (m.steps > 0) out.lr = m.lr;
    out.steps += m.steps;
    out.skipped_steps += m.skipped_steps;
  }
  const double attempts = static_cast<double>(out.steps + out.skipped_steps);
  out.value_loss /= attempts;
  out.clip_frac /= attempts;
  if (out.steps > 0) out.grad_norm /= static_cast<double>(out.steps);
  return out;
}

inline std::vector<torch::Tensor> param_copies(const torch::nn::Module& module) {
  std::vector<torch::Tensor> out;
  for (const auto& p : module.parameters()) {
    if (p.requires_grad()) out.push_back(p.detach().clone());
  }
  return out;
}

inline torch::Tensor stack_rows(const std::vector<std::vector<double>>& rows) {
  if (rows.empty()) return torch::zeros({0}, torch::kFloat64);
  std::vector<torch::Tensor> tensors;
  for (const auto& row : rows) tensors.push_back(torch::tensor(row, torch::kFloat64));
  return torch::stack(tensors);
}

// Runs `updates` updates of `kind` on `batch` with `config`'s group (or none).
// `step_batches` non-empty: instead of one update on `batch`, each update is one
// single-step update per entry (the reference), metrics combined.
inline DpRun run_dp_trainer(DpKind kind, const DataParallelConfig& config, const TrainBatch& batch,
                            const std::vector<TrainBatch>& step_batches, int updates) {
  torch::manual_seed(0);
  const TrainerOptions options = dp_trainer_options(kind);
  std::vector<std::vector<double>> rows;
  DpRun run;
  if (kind == DpKind::kCritic) {
    CriticTrainer critic(critic_from_policy(tiny_model(37)), options, config);
    for (int u = 0; u < updates; ++u) {
      if (step_batches.empty()) {
        rows.push_back(metric_row(critic.update(batch, dp_critic_update(kDpMiniBatchRows))));
      } else {
        std::vector<CriticMetrics> steps;
        for (const auto& b : step_batches) steps.push_back(critic.update(b, dp_critic_update(0)));
        rows.push_back(metric_row(combine(steps)));
      }
    }
    run.params = param_copies(*critic.model());
    run.buckets_overlapped = critic.data_parallel().buckets_overlapped();
  } else {
    ActorOptions actor_options;
    actor_options.trainer = options;
    actor_options.data_parallel = config;
    ActorTrainer actor(tiny_model(31), actor_options);
    for (int u = 0; u < updates; ++u) {
      if (step_batches.empty()) {
        rows.push_back(metric_row(actor.update(batch, dp_actor_update(kind, kDpMiniBatchRows))));
      } else {
        std::vector<ActorMetrics> steps;
        for (const auto& b : step_batches) steps.push_back(actor.update(b, dp_actor_update(kind, 0)));
        rows.push_back(metric_row(combine(steps)));
      }
    }
    run.params = param_copies(*actor.model());
    run.buckets_overlapped = actor.data_parallel().buckets_overlapped();
  }
  run.metrics = stack_rows(rows);
  return run;
}

// One DP rank: its balanced share of the global batch, trained with the group.
inline DpRun run_dp_rank(DpKind kind, ProcessGroupHandle& group, int updates) {
  const TrainBatch global = dp_global_batch();
  const TrainBatch local = split_balanced(global, group.world_size()).at(group.rank());
  DataParallelConfig config;
  config.group = group;
  config.reducer.bucket_mb = 0.001;  // a few KB: several buckets even for the tiny model
  return run_dp_trainer(kind, config, local, {}, updates);
}

// The global mini-batches DP with `world` ranks trains on: step j is the union over
// ranks of each rank's local step j.
inline std::vector<TrainBatch> dp_global_steps(const TrainBatch& global, int world) {
  const auto shares = balanced_share_rows(global, world);
  const int64_t n = global.num_rows();
  std::vector<std::vector<int64_t>> steps(
      static_cast<size_t>(dp_steps_per_epoch(n, kDpMiniBatchRows)));
  for (const auto& share : shares) {
    const auto local = dp_mini_batch_rows(static_cast<int64_t>(share.size()), n,
                                          kDpMiniBatchRows, false, 0, 0);
    for (size_t j = 0; j < local.size(); ++j) {
      for (int64_t i : local[j]) steps[j].push_back(share[static_cast<size_t>(i)]);
    }
  }
  std::vector<TrainBatch> out;
  for (const auto& rows : steps) out.push_back(select_rows(global, rows));
  return out;
}

// The DP = 1 reference for `world` ranks.
inline DpRun run_dp_reference(DpKind kind, int world, int updates) {
  const TrainBatch global = dp_global_batch();
  return run_dp_trainer(kind, DataParallelConfig{}, global, dp_global_steps(global, world),
                        updates);
}

}  // namespace aspen::testing
