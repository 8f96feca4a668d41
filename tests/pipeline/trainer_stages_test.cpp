// The trainer's stages in one pass, on their own: no dock, no thread. What they put in
// the batch is pinned against the parts they are made of: the rollout's log-probs (an
// on-policy update), the actor's recomputation (a stale row), the reference, and the
// batch's advantages.
#include "aspen/pipeline/trainer_stages.h"

#include <gtest/gtest.h>

#include "aspen/pipeline/batch_advantages.h"
#include "tiny_run.h"

namespace aspen::pipeline {
namespace {

// Two groups of two rows, generated at `versions`, with their columns.
struct Rows {
  TrainerRows rows;
  std::vector<ColumnData> columns;
};

Rows two_groups(const std::vector<int64_t>& versions) {
  Rows out;
  ColumnData prompt{rl_columns::kPrompt, {}};
  ColumnData response{rl_columns::kResponse, {}};
  ColumnData logprobs{rl_columns::kRolloutLogprobs, {}};
  ColumnData token_versions{rl_columns::kRolloutVersions, {}};
  const std::vector<int64_t> lengths = {3, 2, 4, 1};
  for (size_t i = 0; i < lengths.size(); ++i) {
    ClaimedRow row;
    row.id = static_cast<RowId>(100 + i);
    row.info.group_id = static_cast<int64_t>(i / 2);
    row.info.group_size = 2;
    row.info.tokens = lengths[i];
    row.info.version = versions[i];
    out.rows.rows.rows.push_back(row);
    out.rows.scores.push_back(static_cast<double>(i % 2));
    prompt.values.push_back(torch::tensor({1, 2, 3}, torch::kInt64) + static_cast<int64_t>(i));
    response.values.push_back(torch::arange(lengths[i], torch::kInt64) + 5);
    logprobs.values.push_back(-0.25f * torch::ones({lengths[i]}));
    token_versions.values.push_back(torch::full({lengths[i]}, versions[i], torch::kInt64));
  }
  out.columns = {prompt, response, logprobs, token_versions};
  return out;
}

struct Trainer {
  TrainConfig config;
  RlSetup setup;
  RlWorkers workers;
  TrainerStages stages;

  explicit Trainer(const std::vector<std::string>& overrides)
      : config(testing::tiny_run_config(overrides)),
        setup(build_rl_setup(config)),
        workers(config, setup),
        stages(TrainerContext{&config, &workers}) {}
};

TEST(TrainerStages, AnOnPolicyBatchTakesTheRolloutsLogprobsAndTheBatchsAdvantages) {
  Trainer t({"algorithm.name=grpo", "algorithm.kl_coef=0.01"});
  const Rows batch = two_groups({0, 0, 0, 0});
  nlohmann::json seconds = nlohmann::json::object();
  const PreparedShare share = t.stages.prepare(batch.rows, batch.columns, 0, seconds);
  const torch::Tensor rollout = torch::cat(batch.columns[2].values);
  EXPECT_TRUE(torch::equal(share.batch.token_column(columns::kOldLogprobs, "test"), rollout));
  EXPECT_TRUE(torch::allclose(share.batch.token_column(columns::kRefLogprobs, "test"),
                              t.workers.reference->compute_logprobs(share.batch)));
  AdvantageInputs inputs{{3, 2, 4, 1}, {0, 0, 1, 1}, {0.0, 1.0, 0.0, 1.0}, {}, {}, {}};
  KlController kl = KlController::fixed(0.0);
  EXPECT_TRUE(torch::allclose(share.batch.token_column(columns::kAdvantages, "test"),
                              batch_advantages(t.config.algorithm, kl, inputs).advantages));
  EXPECT_FALSE(share.proximal_is_current);
  for (const char* stage : {"reference", "old_logprobs", "advantage"}) {
    EXPECT_TRUE(seconds.contains(stage)) << stage;
  }
  const UpdateStats stats = t.stages.update(share, 1);
  EXPECT_EQ(stats.rows, 4);
  EXPECT_EQ(stats.response_tokens, 10);
  EXPECT_EQ(stats.row_versions, (std::vector<int64_t>{0, 0, 0, 0}));
}

TEST(TrainerStages, AStaleRowMakesTheActorRecomputeTheOldLogprobsOrTheUpdateTakeThemItself) {
  Trainer t({"algorithm.name=grpo", "algorithm.off_policy=none", "train.epochs=2"});
  const Rows stale = two_groups({0, 0, 1, 1});  // the weights about to be updated are v1
  nlohmann::json seconds = nlohmann::json::object();
  const PreparedShare share = t.stages.prepare(stale.rows, stale.columns, 1, seconds);
  EXPECT_TRUE(torch::allclose(share.batch.token_column(columns::kOldLogprobs, "test"),
                              t.workers.actor->compute_logprobs(share.batch).logprobs));

  Trainer decoupled({"algorithm.name=grpo", "algorithm.off_policy=decoupled"});
  const PreparedShare single = decoupled.stages.prepare(stale.rows, stale.columns, 1, seconds);
  EXPECT_TRUE(single.proximal_is_current) << "a single step takes them from its forward pass";
}

TEST(TrainerStages, ColumnsThatDisagreeWithTheRowsAreRefused) {
  Trainer t({"algorithm.name=grpo"});
  Rows batch = two_groups({0, 0, 0, 0});
  batch.rows.rows.rows[1].info.tokens = 7;  // the response has 2
  nlohmann::json seconds = nlohmann::json::object();
  EXPECT_THROW(t.stages.prepare(batch.rows, batch.columns, 0, seconds), Error);
  batch = two_groups({0, 0, 0, 0});
  batch.rows.scores.pop_back();
  EXPECT_THROW(t.stages.prepare(batch.rows, batch.columns, 0, seconds), Error);
}

}  // namespace
}  // namespace aspen::pipeline
