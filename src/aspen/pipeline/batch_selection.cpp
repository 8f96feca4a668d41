#include "aspen/pipeline/batch_selection.h"

#include <chrono>
#include <map>

#include "aspen/algo/dapo.h"
#include "aspen/dock/token_balance.h"
#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/rl_rows.h"
#include "aspen/pipeline/staleness_window.h"
#include "aspen/util/log.h"

namespace aspen::pipeline {
namespace {

using Clock = std::chrono::steady_clock;

// The batch lease: the trainer acks it after the update; its failure ends the run.
constexpr double kBatchLeaseSeconds = 24 * 3600.0;
constexpr double kPollSeconds = 0.02;  // the trainer's wait between batch claims
// DAPO dynamic sampling: sampling rounds per batch before it trains on what it has
// (DAPO's max_num_gen_batches; verl's recipe default is unbounded, 4 keeps a run whose
// policy has collapsed to uniform rewards from stalling).
constexpr int kMaxSamplingRounds = 4;

// Splits `rows` into `shares` token-balanced data-parallel shares (its ranks).
void split_into_shares(Claim& rows, int shares) {
  if (shares <= 1) return;
  std::vector<int64_t> tokens;
  for (const ClaimedRow& row : rows.rows) tokens.push_back(row.info.tokens);
  const TokenPartition partition = balance_by_tokens(tokens, shares);
  rows.ranks.clear();
  for (const std::vector<int>& share : partition.ranks) {
    std::vector<RowId> ids;
    for (int i : share) ids.push_back(rows.rows[static_cast<size_t>(i)].id);
    rows.ranks.push_back(std::move(ids));
  }
  rows.imbalance = partition.imbalance;
}

}  // namespace

std::vector<ColumnData> ChosenRows::columns_of(const Claim& share) const {
  std::map<RowId, size_t> position;
  for (size_t i = 0; i < trained.rows.rows.size(); ++i) position[trained.rows.rows[i].id] = i;
  std::vector<ColumnData> out;
  for (const ColumnData& column : columns) {
    ColumnData part{column.name, {}};
    for (const ClaimedRow& row : share.rows) part.values.push_back(column.values.at(position.at(row.id)));
    out.push_back(std::move(part));
  }
  return out;
}

BatchSelector::BatchSelector(const TrainConfig& config, TransferDock& dock, Admission& admission,
                             TraceWriter* trace, int track, std::function<void()> between_polls)
    : config_(config),
      dock_(dock),
      admission_(admission),
      trace_(trace),
      track_(track),
      between_polls_(std::move(between_polls)),
      eta_(staleness_eta(config)),
      batch_groups_(config.rollout.prompts_per_iteration) {}

Claim BatchSelector::claim_batch(int64_t index, int64_t groups_wanted, bool whole,
                                 BatchWait& wait) {
  ClaimOptions options = batch_claim_options(index, eta_, groups_wanted, config_.rollout.n, whole,
                                             /*abort_stragglers=*/config_.pipeline.over_sample > 0);
  options.timeout_s = kPollSeconds;
  options.lease_s = kBatchLeaseSeconds;
  while (true) {
    if (between_polls_) between_polls_();
    const auto wait_start = Clock::now();
    Claim claim = dock_.claim(rl_consumers::kBatch, options);
    if (!claim.empty()) return claim;
    const auto wait_end = Clock::now();
    const double waited = std::chrono::duration<double>(wait_end - wait_start).count();
    wait.idle_s += waited;
    // Sorting: ready groups wait while the window keeps the batch open for groups
    // still generating; otherwise the trainer is starved.
    if (claim.ready_rows_left > 0) wait.sorting_s += waited;
    if (trace_ != nullptr) trace_->span(track_, "wait", wait_start, wait_end);
  }
}

void BatchSelector::read(const Claim& claim, bool drop_uninformative, ChosenRows& chosen,
                         std::vector<RowId>& dropped, std::set<int64_t>& dropped_groups) {
  const std::vector<ColumnData> columns = dock_.get(claim);
  const ColumnData& verifier = find_column(columns, rl_columns::kVerifierScore);
  const ColumnData& shaped = find_column(columns, rl_columns::kScores);
  RewardStats round;
  std::vector<double> shaped_rewards;
  const auto stats = std::find_if(columns.begin(), columns.end(), [](const ColumnData& c) {
    return c.name == rl_columns::kTrajectoryStats;
  });
  if (stats != columns.end()) {
    for (const torch::Tensor& row : stats->values) {
      const torch::Tensor values = row.to(torch::kFloat32).contiguous();
      round.trajectory_stats.emplace_back(values.data_ptr<float>(),
                                          values.data_ptr<float>() + values.numel());
    }
  }
  for (size_t i = 0; i < claim.rows.size(); ++i) {
    const RowInfo& info = claim.rows[i].info;
    round.scores.push_back(verifier.values[i].item<double>());
    round.lengths.push_back(info.tokens);
    round.versions.push_back(info.version);
    round.row_groups.push_back(info.group_id);
    round.groups.insert(info.group_id);
    shaped_rewards.push_back(shaped.values[i].item<double>());
  }
  round.informative = informative_groups(round.row_groups, shaped_rewards);
  chosen.rewards.append(round);  // the metrics cover every row generated
  // DAPO: a group whose rewards are all equal has zero advantage everywhere.
  if (chosen.columns.empty()) {
    for (const std::string& name : claim.columns) chosen.columns.push_back(ColumnData{name, {}});
    chosen.trained.rows.consumer = claim.consumer;
    chosen.trained.rows.columns = claim.columns;
  }
  for (size_t i = 0; i < claim.rows.size(); ++i) {
    const ClaimedRow& row = claim.rows[i];
    if (drop_uninformative && !round.informative.count(row.info.group_id)) {
      dropped.push_back(row.id);
      dropped_groups.insert(row.info.group_id);
      continue;
    }
    chosen.trained.rows.rows.push_back(row);
    chosen.trained.scores.push_back(shaped_rewards[i]);
    for (size_t c = 0; c < columns.size(); ++c) {
      chosen.columns[c].values.push_back(columns[c].values[i]);
    }
  }
}

ChosenRows BatchSelector::choose_batch(int64_t index, int shares, BatchWait& wait) {
  const bool filter = config_.algorithm.dynamic_sampling;
  const int rounds = filter ? kMaxSamplingRounds : 1;
  ChosenRows chosen;
  std::set<int64_t> kept;
  while (static_cast<int64_t>(kept.size()) < batch_groups_ && chosen.sampling_rounds < rounds) {
    ++chosen.sampling_rounds;
    const int64_t wanted = batch_groups_ - static_cast<int64_t>(kept.size());
    Claim claim = claim_batch(index, wanted, /*whole=*/true, wait);
    std::vector<RowId> dropped;
    std::set<int64_t> dropped_groups;
    read(claim, filter, chosen, dropped, dropped_groups);
    for (const ClaimedRow& row : chosen.trained.rows.rows) kept.insert(row.info.group_id);
    if (!dropped.empty()) {
      // They leave the dock, and (before the last round) a new group takes each slot.
      dock_.discard(dropped);
      admission_.consume({dropped_groups.begin(), dropped_groups.end()},
                         /*refill=*/chosen.sampling_rounds < rounds);
    }
    chosen.leases.push_back(std::move(claim));
  }
  if (kept.empty()) {
    log_warn("iteration ", index + 1, ": no informative group in ", rounds,
             " sampling rounds; the update is skipped (the policy version still advances)");
  }
  split_into_shares(chosen.trained.rows, shares);
  return chosen;
}

ChosenRows BatchSelector::next_part(int64_t index, int64_t groups_so_far, BatchWait& wait) {
  ChosenRows chosen;
  const int64_t wanted = batch_groups_ - groups_so_far;
  if (wanted <= 0) return chosen;
  Claim part = claim_batch(index, wanted, /*whole=*/false, wait);
  std::vector<RowId> dropped;  // streaming keeps every group (streams_updates)
  std::set<int64_t> dropped_groups;
  read(part, /*drop_uninformative=*/false, chosen, dropped, dropped_groups);
  chosen.sampling_rounds = 1;
  chosen.completes_batch =
      groups_so_far + static_cast<int64_t>(chosen.rewards.groups.size()) >= batch_groups_ &&
      part.pending_required_rows == 0;
  chosen.leases.push_back(std::move(part));
  return chosen;
}

}  // namespace aspen::pipeline
