// The RL sample as dock rows: the schema every role of one iteration shares, and
// conversions between rollout completions, dock claims and trainer batches.
//
// Columns (R = response tokens of a row, P = prompt tokens):
//   prompt            [P] int64, per row   (admission)
//   example           [1] int64, per row   (admission: the train example the group asks)
//   sample_index      [1] int64, per row   (admission: which sample of its group: its seed)
//   response          [R] int64, per token (rollout)
//   rollout_logprobs  [R] fp32,  per token (rollout: behaviour policy, temperature 1)
//   rollout_versions  [R] int64, per token (rollout: the policy version that sampled
//                     each token; in-flight updates and partial rollouts mix versions
//                     in a row, whose RowInfo::version is its OLDEST token's)
//   scores            [1] fp32,  per row   (reward: the verifier's reward, shaped)
//   verifier_score    [1] fp32,  per row   (reward: before shaping)
// With routing (a MoE policy):
//   rollout_routed_experts [R * S * k] int32, per row (Completion::routed_experts: for
//                     each response token the experts of the S sparse layers, k each)
// With partial rollouts (pipeline.partial_rollout), per row, written empty at
// admission and replaced when a rollout instance cuts the row's unit (rollout_worker.h),
// read by the instance that claims it next:
//   partial_response  [k] int64  the output generated so far
//   partial_logprobs  [k] fp32   its rollout log-probs
//   partial_versions  [k] int64  its per-token policy versions
//   partial_finish    [1] int64  the FinishReason of a sample that had finished when its
//                     unit was cut (its output is whole), kNone (0): continue it
//   partial_routed_experts [k * S * k'] int32 (with routing)
// With trajectories (rollout.environment, trajectory.h), written with the response:
//   loss_mask         [R] fp32,  per token (1: the model's token, 0: an observation's)
//   turn_starts       [T] int64, per row   (each model turn's offset in the response)
//   turn_rewards      [T] fp32,  per row   (the environment's per-turn rewards; NaN: none)
//   trajectory_reward [1] fp32,  per row   (the environment's reward; NaN: none given,
//                     the verifier scores the last turn)
//   trajectory_stats  [kTrajectoryStatsWidth] fp32, per row (turns, tool calls, tool
//                     errors, seconds in the environment, TrajectoryEnd)
// and the prompt column is replaced by the conversation the environment's reset gave,
// as the chat template renders it (the rollout consumer then reads the example too).
// Consumers, in the order a sample visits them: rollout (the instance that generates
// it), reward, batch (the trainer: its stages run in memory on what the batch read,
// trainer_stages.h, so reference and old log-probs, values and advantages are never
// dock columns).
// Thread safety: pure functions.
#pragma once

#include <vector>

#include "aspen/dock/dock_api.h"
#include "aspen/dock/schema.h"
#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/trajectory.h"
#include "aspen/rollout/engine.h"
#include "aspen/train/train_batch.h"

namespace aspen::pipeline {

namespace rl_columns {
inline constexpr const char* kPrompt = "prompt";
inline constexpr const char* kResponse = "response";
inline constexpr const char* kRolloutLogprobs = "rollout_logprobs";
inline constexpr const char* kScores = "scores";
inline constexpr const char* kExample = "example";
inline constexpr const char* kSampleIndex = "sample_index";
inline constexpr const char* kVerifierScore = "verifier_score";
inline constexpr const char* kRolloutRoutedExperts = "rollout_routed_experts";
inline constexpr const char* kRolloutVersions = "rollout_versions";
inline constexpr const char* kPartialResponse = "partial_response";
inline constexpr const char* kPartialLogprobs = "partial_logprobs";
inline constexpr const char* kPartialVersions = "partial_versions";
inline constexpr const char* kPartialFinish = "partial_finish";
inline constexpr const char* kPartialRoutedExperts = "partial_routed_experts";
inline constexpr const char* kLossMask = "loss_mask";  // = train::columns::kLossMask
inline constexpr const char* kTurnStarts = "turn_starts";
inline constexpr const char* kTurnRewards = "turn_rewards";
inline constexpr const char* kTrajectoryReward = "trajectory_reward";
inline constexpr const char* kTrajectoryStats = "trajectory_stats";
}
// trajectory_stats' entries, in order.
enum TrajectoryStat { kStatTurns, kStatToolCalls, kStatToolErrors, kStatWaitSeconds, kStatEnd };
inline constexpr int kTrajectoryStatsWidth = 5;  // namespace rl_columns

namespace rl_consumers {
inline constexpr const char* kRollout = "rollout";
inline constexpr const char* kBatch = "batch";
inline constexpr const char* kReward = "reward";
}  // namespace rl_consumers

struct RlSchemaOptions {
  bool with_routing = false;  // rollout_routed_experts (a MoE policy), for the update
  bool with_partial = false;  // the partial_* columns (pipeline.partial_rollout)
  bool with_trajectory = false;  // the trajectory columns (rollout.environment)
};

DockSchema make_rl_schema(const RlSchemaOptions& options);
// The options a schema made by make_rl_schema was made with (read from its columns).
RlSchemaOptions rl_schema_options(const DockSchema& schema);

// Column values of completions (one row each), in the order of the returned vector;
// with_routing adds rollout_routed_experts (the schema's with_routing: the engine
// records routing, EngineConfig::record_routed_experts).
std::vector<ColumnData> rollout_columns(const std::vector<Completion>& completions,
                                        bool with_routing = false);
// The columns a rollout instance adds to rows allocated at admission (the prompt is
// there already): response, rollout_logprobs, rollout_versions (and routing).
std::vector<ColumnData> response_columns(const std::vector<Completion>& completions,
                                         bool with_routing = false);
// The partial_* columns of completions, one row each: cut ones (finish_reason kNone)
// and finished ones alike. With no completions' output, `rows` empty ones (admission)
// are made by empty_partial_columns.
std::vector<ColumnData> partial_columns(const std::vector<Completion>& completions,
                                        bool with_routing);
std::vector<ColumnData> empty_partial_columns(size_t rows, bool with_routing);
// The columns a rollout instance writes for finished trajectories, one row each: the
// prompt (the rendered conversation), response columns (response_columns of
// Trajectory::as_completion) and the trajectory columns above.
std::vector<ColumnData> trajectory_columns(const std::vector<Trajectory>& trajectories);
// Row `row`'s saved output from `columns` (as a claim of "rollout" gets them): its
// tokens, log-probs, versions, routing and finish reason (no prompt, no sample index).
Completion saved_output(const std::vector<ColumnData>& columns, size_t row, bool with_routing);

// Builds the trainer's view of claimed rows from `columns` (as TransferDock::get
// returns them), copying the named per-token columns into packed [R] tensors, and
// loss_mask as train::columns::kLossMask whenever `columns` hold it (trajectories). A claim
// with no rows gives an empty batch (a data-parallel rank with no local rows).
TrainBatch to_train_batch(const Claim& claim, const std::vector<ColumnData>& columns,
                          const std::vector<std::string>& token_columns);

// The rollout's routing of the claimed rows as the [R, S * k] token column
// columns::kBehaviourRoutedExperts (each row's flat values cut per token); an empty
// [0, 0] tensor for a claim with no rows. aspen::Error when a row's values do not
// divide into its response tokens.
torch::Tensor routed_experts_column(const TrainBatch& batch, const ColumnData& column);

// The column `name` among `columns`; aspen::Error if absent.
const ColumnData& find_column(const std::vector<ColumnData>& columns, const std::string& name);

}  // namespace aspen::pipeline
