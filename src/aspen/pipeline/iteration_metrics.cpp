#include "aspen/pipeline/iteration_metrics.h"
#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/rl_rows.h"
#include "aspen/pipeline/trajectory.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>
#include <vector>

namespace aspen::pipeline {
namespace {

double mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

double sample_std(const std::vector<double>& v) {
  if (v.size() < 2) return 0.0;
  const double m = mean(v);
  double sum = 0.0;
  for (double x : v) sum += (x - m) * (x - m);
  return std::sqrt(sum / static_cast<double>(v.size() - 1));
}

// Multi-turn trajectories: turns, tool calls, tool errors and environment seconds per
// trajectory, and how many ended at each limit (rl_rows.h's trajectory_stats).
nlohmann::json trajectory_metrics(const std::vector<std::vector<float>>& stats) {
  std::vector<double> turns, calls, errors, wait;
  std::map<std::string, int64_t> ends;
  for (const auto& row : stats) {
    if (row.size() < static_cast<size_t>(kTrajectoryStatsWidth)) continue;
    turns.push_back(row[kStatTurns]);
    calls.push_back(row[kStatToolCalls]);
    errors.push_back(row[kStatToolErrors]);
    wait.push_back(row[kStatWaitSeconds]);
    ++ends[trajectory_end_name(static_cast<TrajectoryEnd>(static_cast<int>(row[kStatEnd])))];
  }
  nlohmann::json line = {{"turns_mean", mean(turns)},
                         {"turns_max", turns.empty() ? 0.0 : *std::max_element(turns.begin(), turns.end())},
                         {"tool_calls_mean", mean(calls)},
                         {"tool_errors_mean", mean(errors)},
                         {"tool_wait_s_mean", mean(wait)}};
  for (const TrajectoryEnd end : {TrajectoryEnd::kDone, TrajectoryEnd::kMaxTurns,
                                  TrajectoryEnd::kMaxTokens, TrajectoryEnd::kEnvironment}) {
    const std::string name = trajectory_end_name(end);
    line["trajectory_end_" + name] = ends.count(name) ? ends[name] : 0;
  }
  return line;
}

}  // namespace

nlohmann::json iteration_metrics(const IterationRecord& record) {
  const RewardStats& rewards = record.rewards;
  const ActorMetrics& actor = record.update.actor;
  std::vector<double> lengths(rewards.lengths.begin(), rewards.lengths.end());
  int64_t correct = 0;
  for (double s : rewards.scores) correct += s >= 1.0 ? 1 : 0;
  const double seconds = std::max(record.seconds, 1e-9);
  nlohmann::json line = {
      {"iteration", record.index + 1},
      {"policy_version", record.policy_version},
      {"reward_mean", mean(rewards.scores)},
      {"reward_std", sample_std(rewards.scores)},
      {"accuracy", rewards.scores.empty() ? 0.0
                                          : static_cast<double>(correct) /
                                                static_cast<double>(rewards.scores.size())},
      {"response_length_mean", mean(lengths)},
      {"response_length_max", lengths.empty() ? 0.0 : *std::max_element(lengths.begin(), lengths.end())},
      {"kl", actor.kl_loss},
      {"approx_kl", actor.approx_kl},
      {"entropy", actor.entropy},
      {"clip_frac", actor.clip_frac},
      {"rollout_logprob_diff_mean", actor.rollout_logprob_diff_mean},
      {"rollout_logprob_diff_max", actor.rollout_logprob_diff_max},
      {"correction_capped_frac", actor.correction_capped_frac},
      {"grad_norm", actor.grad_norm},
      {"lr", actor.lr},
      {"policy_loss", actor.policy_loss},
      {"rows", static_cast<int64_t>(rewards.scores.size())},
      {"trained_rows", record.update.rows},
      {"trained_tokens", record.update.response_tokens},
      {"sampling_rounds", record.sampling_rounds},
      {"stage_seconds", record.stage_seconds},
      {"seconds", record.seconds},
      {"tokens_per_second", static_cast<double>(actor.tokens) / seconds},
      {"effective_tps", static_cast<double>(record.update.response_tokens) / seconds}};
  // Each group's response lengths, in the order the groups were drawn: what
  // `aspen simulate` replays (simulate.replay).
  if (!rewards.row_groups.empty() && rewards.row_groups.size() == rewards.lengths.size()) {
    std::vector<int64_t> order;
    std::map<int64_t, std::vector<int64_t>> by_group;
    for (size_t i = 0; i < rewards.lengths.size(); ++i) {
      auto [it, first] = by_group.try_emplace(rewards.row_groups[i]);
      if (first) order.push_back(rewards.row_groups[i]);
      it->second.push_back(rewards.lengths[i]);
    }
    nlohmann::json groups = nlohmann::json::array();
    for (int64_t group : order) groups.push_back(by_group[group]);
    line["response_lengths"] = groups;
  }
  if (!rewards.trajectory_stats.empty()) line.update(trajectory_metrics(rewards.trajectory_stats));
  if (record.advantages.kl_coef > 0.0) {
    line["kl_in_reward"] = record.advantages.kl_in_reward;
    line["kl_reward_coef"] = record.advantages.kl_coef;
  }
  // Positive whenever a MoE model routed any token; absent for a dense model.
  if (actor.router_aux_loss > 0.0) {
    line["router_aux_loss"] = actor.router_aux_loss;
    line["router_load_max"] = actor.router_load_max;
    line["router_load_mean"] = actor.router_load_mean;
    if (actor.router_topk_compared > 0) line["router_topk_mismatch"] = actor.router_topk_mismatch;
  }
  // algorithm.rollout_correction (verl's metric names, rollout_corr/ flattened): present
  // only when it weights or rejects (the token ratio is then > 0).
  if (actor.rollout_is_ratio_mean > 0.0) {
    line["rollout_is_mean"] = actor.rollout_is_mean;
    line["rollout_is_ratio_mean"] = actor.rollout_is_ratio_mean;
    line["rollout_is_ratio_max"] = actor.rollout_is_ratio_max;
    line["rollout_is_ratio_min"] = actor.rollout_is_ratio_min;
    line["rollout_is_truncated_frac"] = actor.rollout_is_truncated_frac;
    line["rollout_rs_masked_frac"] = actor.rollout_rs_masked_frac;
    line["rollout_corr_kl"] = actor.rollout_corr_kl;
  }
  // How many policy versions sampled each trained trajectory (token_versions.h).
  line.update(record.token_versions.metrics());
  if (record.update.critic.steps > 0) {
    line["value_loss"] = record.update.critic.value_loss;
    line["value_clip_frac"] = record.update.critic.clip_frac;
    line["critic_grad_norm"] = record.update.critic.grad_norm;
  }
  return line;
}

}  // namespace aspen::pipeline
