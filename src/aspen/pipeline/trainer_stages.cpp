#include "aspen/pipeline/trainer_stages.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "aspen/dock/claim_codec.h"
#include "aspen/pipeline/batch_advantages.h"
#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/stage_timer.h"
#include "aspen/util/error.h"

namespace aspen::pipeline {
namespace {

torch::Tensor packed_column(const ColumnData& column) {
  if (column.values.empty()) return torch::zeros({0});
  return torch::cat(column.values).to(torch::kFloat32);
}

ActorUpdateOptions actor_update_options(const TrainConfig& config, uint64_t seed) {
  const AlgorithmSection& algorithm = config.algorithm;
  ActorUpdateOptions options;
  options.mini_batch_size = config.train.mini_batch_size;
  options.epochs = config.train.epochs;
  options.seed = seed;
  options.policy.clip_ratio_low = algorithm.clip_ratio_low;
  options.policy.clip_ratio_high = algorithm.clip_ratio_high;
  if (algorithm.clip_ratio_c > 0) options.policy.clip_ratio_c = algorithm.clip_ratio_c;
  options.policy.agg.mode = algorithm.loss_agg;
  if (algorithm.off_policy == OffPolicy::kDecoupled) {
    options.policy.correction = OffPolicyCorrection::kDecoupled;
    if (algorithm.off_policy_cap > 0) options.policy.correction_cap = algorithm.off_policy_cap;
  } else if (algorithm.off_policy == OffPolicy::kTis) {
    options.policy.correction = OffPolicyCorrection::kTruncatedIS;
    options.policy.correction_cap = algorithm.off_policy_cap;
  }
  const RolloutCorrectionSection& rc = algorithm.rollout_correction;
  if (rc.rollout_is != RolloutIsLevel::kNone || rc.rollout_rs != RolloutRsLevel::kNone) {
    // The config reader made sure off_policy resolved to none.
    options.policy.correction = OffPolicyCorrection::kRolloutCorrection;
    options.policy.rollout.is_level = rc.rollout_is;
    options.policy.rollout.is_threshold = rc.rollout_is_threshold;
    options.policy.rollout.rs_level = rc.rollout_rs;
    options.policy.rollout.rs_upper =
        rc.rollout_rs_threshold > 0 ? rc.rollout_rs_threshold : rc.rollout_is_threshold;
    options.policy.rollout.rs_lower = rc.rollout_rs_threshold_lower > 0
                                          ? rc.rollout_rs_threshold_lower
                                          : 1.0 / options.policy.rollout.rs_upper;
  }
  options.routing_replay = rc.routing_replay;
  options.kl_coef = algorithm.kl_coef;
  options.kl_estimator = algorithm.kl_estimator;
  options.entropy_coef = algorithm.entropy_coef;
  options.router_aux_loss_coef = algorithm.router_aux_loss_coef;
  return options;
}

// The rows of each share in share order (one share: the claim).
std::vector<Claim> shares_of(const Claim& rows) {
  if (rows.ranks.empty()) return {rows};
  std::vector<Claim> shares;
  for (size_t d = 0; d < rows.ranks.size(); ++d) shares.push_back(share_of(rows, static_cast<int>(d)));
  return shares;
}

}  // namespace

TrainerStages::TrainerStages(TrainerContext context)
    : config_(*context.config), workers_(*context.workers), context_(std::move(context)) {}

Claim TrainerStages::share(const TrainerRows& rows) const {
  return share_of(rows.rows, context_.dp_rank);
}

torch::Tensor TrainerStages::whole_batch_tokens(const torch::Tensor& local,
                                                const std::vector<int64_t>& share_tokens) {
  if (!context_.trainers) return local;
  // all_gather needs one shape everywhere: each share padded to the longest (at least
  // one element), then cut back; a share's tensor-parallel peers hold the same values,
  // so share d is read from its first rank, d * tp.
  const int64_t longest =
      std::max<int64_t>(1, *std::max_element(share_tokens.begin(), share_tokens.end()));
  torch::Tensor padded = torch::zeros({longest}, torch::kFloat32);
  padded.narrow(0, 0, local.size(0)).copy_(local.to(torch::kFloat32));
  const std::vector<torch::Tensor> gathered = context_.trainers->all_gather(padded);
  std::vector<torch::Tensor> parts;
  for (size_t d = 0; d < share_tokens.size(); ++d) {
    parts.push_back(gathered[d * static_cast<size_t>(context_.tp)].narrow(0, 0, share_tokens[d]));
  }
  return torch::cat(parts);
}

PreparedShare TrainerStages::prepare(const TrainerRows& rows,
                                     const std::vector<ColumnData>& share_columns,
                                     int64_t policy_version, nlohmann::json& stage_seconds) {
  const AlgorithmSection& algorithm = config_.algorithm;
  check_input(rows.scores.size() == rows.rows.rows.size(), "needs one score per row",
              "trainer batch");
  const Claim mine = share(rows);
  PreparedShare out;
  for (const ClaimedRow& row : mine.rows) out.versions.push_back(row.info.version);
  TrainBatch& batch = out.batch;
  batch = to_train_batch(mine, share_columns, {});
  // Trajectories: the loss mask is in every rank's batch (its gather below is a
  // collective), an empty one on a rank with no rows.
  if (workers_.schema.with_trajectory && !batch.token_columns.count(columns::kLossMask)) {
    batch.token_columns[columns::kLossMask] = torch::zeros({0});
  }
  for (size_t i = 0; i < mine.rows.size(); ++i) {
    check_input(static_cast<int64_t>(batch.responses[i].size()) == mine.rows[i].info.tokens,
                "row " + std::to_string(mine.rows[i].id) + " has " +
                    std::to_string(batch.responses[i].size()) + " response tokens, its info says " +
                    std::to_string(mine.rows[i].info.tokens),
                "trainer batch");
  }
  batch.token_columns[columns::kBehaviourLogprobs] =
      mine.empty() ? torch::zeros({0})
                   : packed_column(find_column(share_columns, rl_columns::kRolloutLogprobs));
  // Each token's sampling version, for what a correction or metric needs per token.
  batch.token_columns[rl_columns::kRolloutVersions] =
      mine.empty() ? torch::zeros({0})
                   : packed_column(find_column(share_columns, rl_columns::kRolloutVersions));
  if (workers_.schema.with_routing) {
    batch.token_columns[columns::kBehaviourRoutedExperts] =
        mine.empty() ? torch::zeros({0, 0}, torch::kInt32)
                     : routed_experts_column(
                           batch, find_column(share_columns, rl_columns::kRolloutRoutedExperts));
  }
  // Old log-probs: the rollout's when every row was generated by exactly the weights
  // about to be updated and the update is a single step; otherwise recomputed (the
  // proximal policy of decoupled PPO). Without a decoupled correction the rollout
  // log-probs ARE the right PPO anchor for stale rows (the ratio is then the
  // importance weight to the behaviour policy). Decoupled PPO's proximal policy for a
  // single-step update is the current one, which the update's own forward pass
  // provides (old_logprobs then holds the rollout's, read only by a KL in the reward).
  const auto batch_rows = static_cast<int64_t>(rows.rows.rows.size());
  const bool fresh = std::all_of(rows.rows.rows.begin(), rows.rows.rows.end(),
                                 [&](const ClaimedRow& row) { return row.info.version == policy_version; });
  const bool one_step = config_.train.epochs == 1 && (config_.train.mini_batch_size <= 0 ||
                                                      config_.train.mini_batch_size >= batch_rows);
  // verl's rollout correction (not in bypass mode) separates the proximal policy from
  // the behaviour one exactly as decoupled PPO does; bypass mode anchors at the rollout.
  const RolloutCorrectionSection& rc = algorithm.rollout_correction;
  const bool decoupled = algorithm.off_policy == OffPolicy::kDecoupled ||
                         (rc.corrects() && !rc.bypass_mode);
  out.proximal_is_current = one_step && decoupled && !fresh;
  const bool reuse_rollout = rc.bypass_mode || (one_step && (fresh || !decoupled));
  TraceWriter* trace = context_.trace;
  const int track = context_.track;
  // An expert-parallel model's forwards are collectives over its EP ranks: a rank
  // with no rows still joins them.
  if (workers_.reference) {
    timed_stage(stage_seconds, "reference", trace, track, [&] {
      if (mine.empty() && !workers_.reference->model()->ep.enabled()) {
        batch.token_columns[columns::kRefLogprobs] = torch::zeros({0});
        return;
      }
      batch.token_columns[columns::kRefLogprobs] = workers_.reference->compute_logprobs(batch);
    });
  }
  timed_stage(stage_seconds, "old_logprobs", trace, track, [&] {
    if (reuse_rollout || out.proximal_is_current) {
      batch.token_columns[columns::kOldLogprobs] =
          batch.token_columns.at(columns::kBehaviourLogprobs).clone();
    } else if (mine.empty() && !workers_.actor->model()->ep.enabled()) {
      batch.token_columns[columns::kOldLogprobs] = torch::zeros({0});
    } else {
      batch.token_columns[columns::kOldLogprobs] =
          workers_.actor->compute_logprobs(batch, false, rc.routing_replay).logprobs;
    }
  });
  if (workers_.critic) {
    timed_stage(stage_seconds, "values", trace, track, [&] {
      batch.token_columns[columns::kValues] =
          mine.empty() ? torch::zeros({0}) : workers_.critic->compute_values(batch);
    });
  }
  timed_stage(stage_seconds, "advantage", trace, track, [&] {
    // The whole batch in share order: per row from the metadata every trainer has,
    // per token gathered from the shares.
    std::map<RowId, double> score_of;
    for (size_t i = 0; i < rows.rows.rows.size(); ++i) score_of[rows.rows.rows[i].id] = rows.scores[i];
    AdvantageInputs inputs;
    std::vector<int64_t> share_tokens;
    for (const Claim& part : shares_of(rows.rows)) {
      int64_t tokens = 0;
      for (const ClaimedRow& row : part.rows) {
        inputs.lengths.push_back(row.info.tokens);
        inputs.group_ids.push_back(row.info.group_id);
        inputs.scores.push_back(score_of.at(row.id));
        tokens += row.info.tokens;
      }
      share_tokens.push_back(tokens);
    }
    if (algorithm.kl_in_reward) {
      inputs.old_logprobs =
          whole_batch_tokens(batch.token_columns.at(columns::kOldLogprobs), share_tokens);
      inputs.ref_logprobs =
          whole_batch_tokens(batch.token_columns.at(columns::kRefLogprobs), share_tokens);
    }
    if (workers_.critic) {
      inputs.values = whole_batch_tokens(batch.token_columns.at(columns::kValues), share_tokens);
    }
    // Multi-turn trajectories: the estimators see model tokens only. Gathered like the
    // other token inputs (a collective): the column is in every rank's batch or in none.
    const auto mask = batch.token_columns.find(columns::kLossMask);
    if (mask != batch.token_columns.end()) {
      inputs.loss_mask = whole_batch_tokens(mask->second, share_tokens);
    }
    const BatchAdvantages whole = batch_advantages(algorithm, workers_.kl_ctrl, inputs);
    const size_t d = context_.trainers ? static_cast<size_t>(context_.dp_rank) : 0;
    const int64_t offset =
        std::accumulate(share_tokens.begin(), share_tokens.begin() + static_cast<long>(d), int64_t{0});
    batch.token_columns[columns::kAdvantages] =
        whole.advantages.narrow(0, offset, share_tokens[d]).contiguous();
    if (whole.returns.defined()) {
      batch.token_columns[columns::kReturns] =
          whole.returns.narrow(0, offset, share_tokens[d]).contiguous();
    }
    out.advantages = whole.stats;
  });
  batch.validate();
  return out;
}

UpdateStats TrainerStages::update(const PreparedShare& share, uint64_t seed) {
  UpdateStats stats;
  const TrainBatch& batch = share.batch;
  // A data-parallel trainer's update is collective: it runs with no local rows too.
  const bool collective = workers_.actor->data_parallel().enabled();
  stats.row_versions = share.versions;
  stats.rows = batch.num_rows();
  if (stats.rows > 0 || collective) {
    ActorUpdateOptions update = actor_update_options(config_, seed);
    update.proximal_is_current = share.proximal_is_current;
    stats.actor = workers_.actor->update(batch, update);
    stats.response_tokens = batch.num_response_tokens();
  }
  if (workers_.critic && (stats.rows > 0 || collective)) {
    // The critic's view: its two columns only (the actor's may be 2-D, e.g. routing).
    TrainBatch critic_batch;
    critic_batch.prompts = batch.prompts;
    critic_batch.responses = batch.responses;
    for (const char* name : {columns::kValues, columns::kReturns}) {
      critic_batch.token_columns[name] = batch.token_column(name, "critic update");
    }
    CriticUpdateOptions update;
    update.mini_batch_size = config_.train.mini_batch_size;
    update.epochs = config_.train.epochs;
    update.seed = seed;
    update.clip_range = config_.algorithm.value_clip;
    update.agg.mode = config_.algorithm.loss_agg;
    stats.critic = workers_.critic->update(critic_batch, update);
  }
  if (context_.trainers) {
    // The update's metrics are global already; its row and token counts are this
    // share's, held by its tensor-parallel peers too: counted once.
    const double peers = static_cast<double>(context_.tp);
    torch::Tensor counts = torch::tensor({static_cast<double>(stats.rows) / peers,
                                          static_cast<double>(stats.response_tokens) / peers},
                                         torch::kFloat64);
    context_.trainers->all_reduce_sum(counts);
    stats.rows = std::llround(counts[0].item<double>());
    stats.response_tokens = std::llround(counts[1].item<double>());
  }
  return stats;
}

UpdateStats TrainerStages::accumulate(const PreparedShare& share, uint64_t seed) {
  check_input(!workers_.critic, "a streamed update has no critic step", "trainer stages");
  UpdateStats stats;
  stats.row_versions = share.versions;
  stats.rows = share.batch.num_rows();
  if (stats.rows > 0) {
    ActorUpdateOptions update = actor_update_options(config_, seed);
    update.mini_batch_size = 0;  // one step over everything accumulated
    update.proximal_is_current = share.proximal_is_current;
    workers_.actor->accumulate(share.batch, update);
    stats.response_tokens = share.batch.num_response_tokens();
  }
  return stats;
}

ActorMetrics TrainerStages::finish(uint64_t seed) {
  return workers_.actor->step_accumulated(actor_update_options(config_, seed));
}

}  // namespace aspen::pipeline
