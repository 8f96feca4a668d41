// Admission and batch selection, each on its own: an in-process dock, no thread. A
// fake rollout and reward (FakeRoles) generate and score whatever is claimable when
// the batch selector polls, so the tests drive the staleness window, DAPO's rounds
// and the batch read deterministically.
#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "aspen/dock/claim_codec.h"
#include "aspen/dock/in_process_transport.h"
#include "aspen/pipeline/admission.h"
#include "aspen/pipeline/batch_selection.h"
#include "aspen/pipeline/instance_status.h"
#include "aspen/pipeline/rl_rows.h"
#include "aspen/util/clock.h"
#include "tiny_run.h"

namespace aspen::pipeline {
namespace {

constexpr int64_t kResponseTokens = 3;

// The ledger's clock is `clock`: status-board ages move only when a test moves it.
std::unique_ptr<TransferDock> in_process_dock(const TimeSource* clock) {
  DockControllerOptions options{1 << 12};
  options.clock = clock;
  return std::make_unique<TransferDock>(std::make_shared<InProcessTransport>(
      std::make_shared<InProcessDock>(make_rl_schema({}), options, 1), 0));
}

// Generates every claimable rollout row (kResponseTokens tokens at `version`) and
// scores every claimable reward row with score(group, row).
struct FakeRoles {
  TransferDock& dock;
  std::function<double(int64_t group, RowId row)> score;
  int64_t version = 0;

  void run() {
    ClaimOptions options;
    options.max_rows = 1 << 12;
    const Claim rollout = dock.claim(rl_consumers::kRollout, options);
    if (!rollout.empty()) {
      std::vector<RowInfo> infos;
      ColumnData response{rl_columns::kResponse, {}};
      ColumnData logprobs{rl_columns::kRolloutLogprobs, {}};
      ColumnData versions{rl_columns::kRolloutVersions, {}};
      for (const ClaimedRow& row : rollout.rows) {
        RowInfo info = row.info;
        info.tokens = kResponseTokens;
        info.version = version;
        infos.push_back(info);
        response.values.push_back(torch::arange(kResponseTokens, torch::kInt64) + 10);
        logprobs.values.push_back(torch::full({kResponseTokens}, -0.5f));
        versions.values.push_back(torch::full({kResponseTokens}, version, torch::kInt64));
      }
      dock.put_columns(rollout.row_ids(), {response, logprobs, versions}, infos);
      dock.ack(rollout);
    }
    const Claim reward = dock.claim(rl_consumers::kReward, options);
    if (reward.empty()) return;
    ColumnData scores{rl_columns::kScores, {}};
    ColumnData verifier{rl_columns::kVerifierScore, {}};
    for (const ClaimedRow& row : reward.rows) {
      const auto s = static_cast<float>(score(row.info.group_id, row.id));
      scores.values.push_back(torch::tensor({s}));
      verifier.values.push_back(torch::tensor({s}));
    }
    dock.put_columns(reward.row_ids(), {scores, verifier});
    dock.ack(reward);
  }
};

struct Fixture {
  TrainConfig config;
  RlSetup setup;
  EngineLayout layout;
  ManualClock clock;
  std::unique_ptr<TransferDock> dock = in_process_dock(&clock);
  Admission admission;

  explicit Fixture(const std::vector<std::string>& overrides)
      : config(testing::tiny_run_config(overrides)),
        setup(build_rl_setup(config)),
        layout(engine_layout(config, 0, 1)),
        admission(config, setup, *dock, layout, nullptr, 0) {}

  int64_t waiting_groups() { return dock->backlog(rl_consumers::kBatch).groups; }
  void report(int instance) {
    InstanceStatus status;
    status.instance = instance;
    dock->post_status(instance_status_key(instance), encode_instance_status(status));
  }
};

TEST(Admission, KeepsTheStalenessWindowOfEtaPlusOneBatchesAndMovesWithThePublishedVersion) {
  Fixture sync({"pipeline.mode=sync"});  // eta 0: one batch of 4 groups per version
  sync.admission.admit();
  EXPECT_EQ(sync.waiting_groups(), 4);
  sync.admission.admit();
  EXPECT_EQ(sync.waiting_groups(), 4) << "the window is full";
  sync.admission.set_published_version(1);
  sync.admission.admit();
  EXPECT_EQ(sync.waiting_groups(), 8);

  Fixture async({"pipeline.mode=async", "pipeline.max_staleness=2"});
  async.admission.admit();
  EXPECT_EQ(async.waiting_groups(), 12) << "(0 + 2 + 1) batches of 4";
}

TEST(Admission, GroupsDroppedBeforeTheLastRoundAreReplacedAndTrainedOnesAreNot) {
  Fixture f({"pipeline.mode=sync"});
  f.admission.admit();
  ClaimOptions options;
  options.max_rows = 1 << 12;
  options.whole_groups = true;
  FakeRoles roles{*f.dock, [](int64_t, RowId) { return 1.0; }};
  roles.run();
  const Claim batch = f.dock->claim(rl_consumers::kBatch, options);
  std::set<int64_t> groups;
  for (const ClaimedRow& row : batch.rows) groups.insert(row.info.group_id);
  ASSERT_EQ(groups.size(), 4u);
  // Two groups dropped (refilled), then the batch's other two trained (not refilled).
  std::vector<int64_t> all(groups.begin(), groups.end());
  std::vector<RowId> dropped;
  for (const ClaimedRow& row : batch.rows) {
    if (row.info.group_id == all[0] || row.info.group_id == all[1]) dropped.push_back(row.id);
  }
  f.dock->discard(dropped);
  f.admission.consume({all[0], all[1]}, /*refill=*/true);
  f.admission.admit();
  EXPECT_EQ(f.waiting_groups(), 2) << "two new groups take the dropped ones' slots";
  f.dock->ack(batch);
  f.admission.consume({all[2], all[3]}, /*refill=*/false);
  f.admission.admit();
  EXPECT_EQ(f.waiting_groups(), 2) << "trained groups free no slot before the next version";
}

TEST(Admission, ARestoredAdmissionAdmitsTheOpenGroupsAgainWithTheirIds) {
  Fixture f({"pipeline.mode=sync"});
  f.admission.admit();
  const nlohmann::json state = f.admission.state();
  ASSERT_EQ(state.at("pending").size(), 4u);

  Fixture resumed({"pipeline.mode=sync"});
  resumed.admission.restore(state, /*version=*/3);
  EXPECT_EQ(resumed.waiting_groups(), 4);
  ClaimOptions options;
  options.max_rows = 1 << 12;
  const Claim rows = resumed.dock->claim(rl_consumers::kRollout, options);
  std::set<int64_t> ids;
  for (const ClaimedRow& row : rows.rows) {
    ids.insert(row.info.group_id);
    EXPECT_EQ(row.info.version, 3);
  }
  std::set<int64_t> pending;
  for (const auto& entry : state.at("pending")) pending.insert(entry.at(0).get<int64_t>());
  EXPECT_EQ(ids, pending);
}

TEST(Admission, AnInstanceSilentPastTheTimeoutFailsAndItsGroupsGoToAnyInstance) {
  Fixture f({"pipeline.instances=2", "pipeline.dispatch=round_robin",
             "pipeline.instance_timeout_s=5", "pipeline.on_instance_failure=regenerate"});
  f.report(0);
  f.report(1);
  f.admission.admit();  // round robin: groups for both instances
  f.clock.advance(6);
  f.report(1);  // instance 1 is alive; 0 has been silent for 6 s
  f.admission.refresh_instances();
  EXPECT_EQ(f.admission.instance_metrics().at("failed_instances"), 1);
  // Every admitted row is now claimable by instance 1: its own, and 0's re-targeted.
  ClaimOptions options;
  options.max_rows = 1 << 12;
  options.target = 1;
  EXPECT_EQ(f.dock->claim(rl_consumers::kRollout, options).rows.size(), 16u);
  f.admission.admit();
  ClaimOptions any;
  any.max_rows = 1 << 12;
  for (const ClaimedRow& row : f.dock->claim(rl_consumers::kRollout, any).rows) {
    EXPECT_NE(row.info.target, 0) << "a group was dispatched to the failed instance";
  }
}

TEST(Admission, UnderStopAnInstanceSilentPastTheTimeoutEndsTheRunNamingIt) {
  Fixture f({"pipeline.instances=2", "pipeline.instance_timeout_s=5",
             "pipeline.on_instance_failure=stop"});
  f.report(0);
  f.report(1);
  f.admission.refresh_instances();
  f.clock.advance(6);
  f.report(0);
  try {
    f.admission.refresh_instances();
    FAIL() << "expected the run to stop";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rollout instance 1"), std::string::npos) << what;
    EXPECT_NE(what.find("pipeline.on_instance_failure"), std::string::npos) << what;
  }
}

TEST(BatchSelector, ReadsEveryColumnTheTrainerNeedsOnceAndSplitsTheRowsIntoShares) {
  Fixture f({"pipeline.mode=sync"});
  FakeRoles roles{*f.dock, [](int64_t group, RowId) { return group % 2 == 0 ? 1.0 : 0.0; }};
  BatchSelector selector(f.config, *f.dock, f.admission, nullptr, 0, [&] {
    f.admission.admit();
    roles.run();
  });
  BatchWait wait;
  const int64_t calls_before = f.dock->row_calls();
  const ChosenRows chosen = selector.choose_batch(0, /*shares=*/2, wait);
  ASSERT_EQ(chosen.trained.rows.rows.size(), 16u);
  EXPECT_EQ(chosen.trained.scores.size(), 16u);
  EXPECT_EQ(chosen.rewards.scores.size(), 16u);
  EXPECT_EQ(chosen.sampling_rounds, 1);
  ASSERT_EQ(chosen.trained.rows.ranks.size(), 2u);
  EXPECT_EQ(chosen.trained.rows.ranks[0].size() + chosen.trained.rows.ranks[1].size(), 16u);
  for (const char* name : {rl_columns::kPrompt, rl_columns::kResponse,
                           rl_columns::kRolloutLogprobs, rl_columns::kScores}) {
    EXPECT_EQ(find_column(chosen.columns, name).values.size(), 16u) << name;
  }
  for (size_t i = 0; i < chosen.trained.scores.size(); ++i) {
    EXPECT_EQ(chosen.trained.scores[i],
              chosen.trained.rows.rows[i].info.group_id % 2 == 0 ? 1.0 : 0.0);
  }
  // A share's columns are its rows' (what trainer 0 trains on without reading again).
  const Claim second = share_of(chosen.trained.rows, 1);
  const std::vector<ColumnData> mine = chosen.columns_of(second);
  const ColumnData& all_scores = find_column(chosen.columns, rl_columns::kScores);
  ASSERT_EQ(find_column(mine, rl_columns::kScores).values.size(), second.rows.size());
  for (size_t i = 0; i < second.rows.size(); ++i) {
    size_t at = 0;
    while (chosen.trained.rows.rows[at].id != second.rows[i].id) ++at;
    EXPECT_TRUE(torch::equal(find_column(mine, rl_columns::kScores).values[i],
                             all_scores.values[at]));
  }
  // Per row: admission's put, the fake rollout's claim, put and ack, the fake
  // reward's claim, put and ack, and the batch's claim and get.
  EXPECT_EQ(f.dock->row_calls() - calls_before, 16 * 9);
}

TEST(BatchSelector, DapoDropsGroupsWithEqualRewardsAndRefillsUntilTheLastRound) {
  Fixture f({"algorithm.name=dapo", "pipeline.mode=sync"});
  ASSERT_TRUE(f.config.algorithm.dynamic_sampling);
  // Groups below 6 have equal rewards (all 1); from 6 on their rows alternate 0, 1.
  FakeRoles roles{*f.dock, [](int64_t group, RowId row) {
                    return group < 6 ? 1.0 : static_cast<double>(row % 2);
                  }};
  BatchSelector selector(f.config, *f.dock, f.admission, nullptr, 0, [&] {
    f.admission.admit();
    roles.run();
  });
  BatchWait wait;
  const ChosenRows chosen = selector.choose_batch(0, 1, wait);
  EXPECT_GT(chosen.sampling_rounds, 1);
  EXPECT_LE(chosen.sampling_rounds, 4);
  for (const ClaimedRow& row : chosen.trained.rows.rows) {
    EXPECT_GE(row.info.group_id, 6) << "a group with equal rewards was kept";
  }
  EXPECT_GE(chosen.rewards.groups.size(), chosen.trained.rows.rows.size() / 4);
}

}  // namespace
}  // namespace aspen::pipeline
