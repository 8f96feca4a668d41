// algorithm.rollout_correction in the trainer's stages: outside bypass mode the old
// log-probs are the proximal policy's (recomputed, or the update's own forward for a
// single step), as for decoupled PPO; bypass mode anchors at the rollout's log-probs
// even over several steps; the update reports the correction's metrics against a
// rollout whose log-probs are off the trainer's.
#include <gtest/gtest.h>

#include "aspen/pipeline/trainer_stages.h"
#include "tiny_run.h"

namespace aspen::pipeline {
namespace {

// Two groups of two rows generated at version 0, with rollout log-probs -0.25.
struct StaleRows {
  TrainerRows rows;
  std::vector<ColumnData> columns;
  StaleRows() {
    ColumnData prompt{rl_columns::kPrompt, {}};
    ColumnData response{rl_columns::kResponse, {}};
    ColumnData logprobs{rl_columns::kRolloutLogprobs, {}};
    ColumnData versions{rl_columns::kRolloutVersions, {}};
    const std::vector<int64_t> lengths = {3, 2, 4, 1};
    for (size_t i = 0; i < lengths.size(); ++i) {
      ClaimedRow row;
      row.id = static_cast<RowId>(200 + i);
      row.info.group_id = static_cast<int64_t>(i / 2);
      row.info.group_size = 2;
      row.info.tokens = lengths[i];
      row.info.version = 0;
      rows.rows.rows.push_back(row);
      rows.scores.push_back(static_cast<double>(i % 2));
      prompt.values.push_back(torch::tensor({1, 2, 3}, torch::kInt64) + static_cast<int64_t>(i));
      response.values.push_back(torch::arange(lengths[i], torch::kInt64) + 5);
      logprobs.values.push_back(-0.25f * torch::ones({lengths[i]}));
      versions.values.push_back(torch::zeros({lengths[i]}, torch::kInt64));
    }
    columns = {prompt, response, logprobs, versions};
  }
};

struct CorrectedTrainer {
  TrainConfig config;
  RlSetup setup;
  RlWorkers workers;
  TrainerStages stages;
  explicit CorrectedTrainer(const std::vector<std::string>& overrides)
      : config(testing::tiny_run_config(overrides)),
        setup(build_rl_setup(config)),
        workers(config, setup),
        stages(TrainerContext{&config, &workers}) {}
};

TEST(RolloutCorrectionStages, TheProximalPolicyIsRecomputedOrTakenFromTheUpdate) {
  const StaleRows stale;
  nlohmann::json seconds = nlohmann::json::object();
  CorrectedTrainer multi({"algorithm.name=grpo", "train.epochs=2",
                          "algorithm.rollout_correction.rollout_is=token"});
  EXPECT_EQ(multi.config.algorithm.off_policy, OffPolicy::kNone);
  const PreparedShare recomputed = multi.stages.prepare(stale.rows, stale.columns, 1, seconds);
  EXPECT_TRUE(torch::allclose(recomputed.batch.token_column(columns::kOldLogprobs, "test"),
                              multi.workers.actor->compute_logprobs(recomputed.batch).logprobs));
  CorrectedTrainer single({"algorithm.name=grpo", "algorithm.rollout_correction.rollout_rs=token"});
  EXPECT_TRUE(single.stages.prepare(stale.rows, stale.columns, 1, seconds).proximal_is_current);
}

TEST(RolloutCorrectionStages, BypassModeAnchorsAtTheRolloutEvenOverSeveralSteps) {
  const StaleRows stale;
  nlohmann::json seconds = nlohmann::json::object();
  CorrectedTrainer t({"algorithm.name=grpo", "train.epochs=2",
                      "algorithm.rollout_correction.bypass_mode=true"});
  const PreparedShare share = t.stages.prepare(stale.rows, stale.columns, 1, seconds);
  EXPECT_FALSE(share.proximal_is_current);
  EXPECT_TRUE(torch::equal(share.batch.token_column(columns::kOldLogprobs, "test"),
                           torch::cat(stale.columns[2].values)));
}

TEST(RolloutCorrectionStages, TheUpdateReportsTheCorrectionsMetrics) {
  const StaleRows stale;
  nlohmann::json seconds = nlohmann::json::object();
  // Rollout log-probs -0.25 against the trainer's (about -ln V): ratios far from 1, so
  // token TIS at 2 truncates and token rejection outside [0.5, 2] drops tokens.
  CorrectedTrainer t({"algorithm.name=grpo", "algorithm.rollout_correction.rollout_is=token",
                      "algorithm.rollout_correction.rollout_rs=token"});
  const PreparedShare share = t.stages.prepare(stale.rows, stale.columns, 1, seconds);
  // A single step: the proximal policy is the current weights, before the step.
  ASSERT_TRUE(share.proximal_is_current);
  const torch::Tensor ratio =
      (t.workers.actor->compute_logprobs(share.batch).logprobs.to(torch::kDouble) + 0.25).exp();
  const ActorMetrics m = t.stages.update(share, 1).actor;
  EXPECT_GT(m.rollout_is_ratio_mean, 0.0);
  EXPECT_NEAR(m.rollout_rs_masked_frac, ((ratio < 0.5) | (ratio > 2.0)).to(torch::kDouble).mean().item<double>(),
              1e-6);
  EXPECT_GT(m.rollout_rs_masked_frac, 0.0);
  EXPECT_NEAR(m.rollout_is_ratio_max, ratio.max().item<double>(), 1e-5 * ratio.max().item<double>());
  EXPECT_NEAR(m.rollout_is_ratio_min, ratio.min().item<double>(), 1e-5 * ratio.min().item<double>());
  EXPECT_GT(m.rollout_corr_kl, 0.0);
}

}  // namespace
}  // namespace aspen::pipeline
