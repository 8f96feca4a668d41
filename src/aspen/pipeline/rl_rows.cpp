#include "aspen/pipeline/rl_rows.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "aspen/pipeline/imports.h"
#include "aspen/util/error.h"

namespace aspen::pipeline {

DockSchema make_rl_schema(const RlSchemaOptions& options) {
  using namespace rl_columns;
  std::vector<ColumnSpec> columns = {{kPrompt, torch::kInt64, ColumnKind::kPerRow},
                                     {kResponse, torch::kInt64, ColumnKind::kPerToken},
                                     {kRolloutLogprobs, torch::kFloat32, ColumnKind::kPerToken},
                                     {kScores, torch::kFloat32, ColumnKind::kPerRow},
                                     {kExample, torch::kInt64, ColumnKind::kPerRow},
                                     {kSampleIndex, torch::kInt64, ColumnKind::kPerRow},
                                     {kVerifierScore, torch::kFloat32, ColumnKind::kPerRow}};
  // Rows are allocated at admission with their prompt, example and sample index; the
  // rollout consumer generates them, reward scores them, and the batch consumer (the
  // trainer) reads everything its stages need in one get (trainer_stages.h).
  columns.push_back({kRolloutVersions, torch::kInt64, ColumnKind::kPerToken});
  ConsumerSpec batch{rl_consumers::kBatch, {kPrompt, kResponse, kRolloutLogprobs,
                                            kRolloutVersions, kScores, kVerifierScore}};
  if (options.with_routing) {
    columns.push_back({kRolloutRoutedExperts, torch::kInt32, ColumnKind::kPerRow});
    batch.columns.push_back(kRolloutRoutedExperts);
  }
  ConsumerSpec rollout{rl_consumers::kRollout, {kPrompt, kSampleIndex}};
  if (options.with_partial) {
    // Per row (not per token): a cut row's info.tokens stays its admission estimate.
    for (const auto& [name, dtype] :
         std::vector<std::pair<const char*, torch::ScalarType>>{{kPartialResponse, torch::kInt64},
                                                                {kPartialLogprobs, torch::kFloat32},
                                                                {kPartialVersions, torch::kInt64},
                                                                {kPartialFinish, torch::kInt64}}) {
      columns.push_back({name, dtype, ColumnKind::kPerRow});
      rollout.columns.push_back(name);
    }
    if (options.with_routing) {
      columns.push_back({kPartialRoutedExperts, torch::kInt32, ColumnKind::kPerRow});
      rollout.columns.push_back(kPartialRoutedExperts);
    }
  }
  ConsumerSpec reward{rl_consumers::kReward, {kPrompt, kResponse, kExample}};
  if (options.with_trajectory) {
    columns.push_back({kLossMask, torch::kFloat32, ColumnKind::kPerToken});
    for (const auto& [name, dtype] :
         std::vector<std::pair<const char*, torch::ScalarType>>{{kTurnStarts, torch::kInt64},
                                                                {kTurnRewards, torch::kFloat32},
                                                                {kTrajectoryReward, torch::kFloat32},
                                                                {kTrajectoryStats, torch::kFloat32}}) {
      columns.push_back({name, dtype, ColumnKind::kPerRow});
    }
    rollout.columns.push_back(kExample);  // the data row the environment resets from
    for (const char* name : {kTurnStarts, kTrajectoryReward}) reward.columns.push_back(name);
    for (const char* name : {kLossMask, kTurnStarts, kTurnRewards, kTrajectoryStats}) {
      batch.columns.push_back(name);
    }
  }
  const std::vector<ConsumerSpec> consumers = {rollout, reward, batch};
  return DockSchema(columns, consumers);
}

RlSchemaOptions rl_schema_options(const DockSchema& schema) {
  auto has = [&schema](const char* name) {
    const auto& columns = schema.columns();
    return std::any_of(columns.begin(), columns.end(),
                       [name](const ColumnSpec& c) { return c.name == name; });
  };
  RlSchemaOptions options;
  options.with_routing = has(rl_columns::kRolloutRoutedExperts);
  options.with_partial = has(rl_columns::kPartialResponse);
  options.with_trajectory = has(rl_columns::kLossMask);
  return options;
}

std::vector<ColumnData> rollout_columns(const std::vector<Completion>& completions,
                                        bool with_routing) {
  ColumnData prompt{rl_columns::kPrompt, {}};
  ColumnData response{rl_columns::kResponse, {}};
  ColumnData logprobs{rl_columns::kRolloutLogprobs, {}};
  ColumnData versions{rl_columns::kRolloutVersions, {}};
  ColumnData routing{rl_columns::kRolloutRoutedExperts, {}};
  for (const Completion& c : completions) {
    if (with_routing) routing.values.push_back(torch::tensor(c.routed_experts, torch::kInt32));
    std::vector<int64_t> p(c.prompt_token_ids.begin(), c.prompt_token_ids.end());
    std::vector<int64_t> r(c.token_ids.begin(), c.token_ids.end());
    prompt.values.push_back(torch::tensor(p, torch::kInt64));
    response.values.push_back(torch::tensor(r, torch::kInt64));
    logprobs.values.push_back(torch::tensor(c.logprobs, torch::kFloat32));
    versions.values.push_back(torch::tensor(c.policy_versions, torch::kInt64));
  }
  if (with_routing) return {prompt, response, logprobs, versions, routing};
  return {prompt, response, logprobs, versions};
}

std::vector<ColumnData> partial_columns(const std::vector<Completion>& completions,
                                        bool with_routing) {
  ColumnData response{rl_columns::kPartialResponse, {}};
  ColumnData logprobs{rl_columns::kPartialLogprobs, {}};
  ColumnData versions{rl_columns::kPartialVersions, {}};
  ColumnData finish{rl_columns::kPartialFinish, {}};
  ColumnData routing{rl_columns::kPartialRoutedExperts, {}};
  for (const Completion& c : completions) {
    const std::vector<int64_t> tokens(c.token_ids.begin(), c.token_ids.end());
    response.values.push_back(torch::tensor(tokens, torch::kInt64));
    logprobs.values.push_back(torch::tensor(c.logprobs, torch::kFloat32));
    versions.values.push_back(torch::tensor(c.policy_versions, torch::kInt64));
    finish.values.push_back(torch::tensor({static_cast<int64_t>(c.finish_reason)}, torch::kInt64));
    if (with_routing) routing.values.push_back(torch::tensor(c.routed_experts, torch::kInt32));
  }
  if (with_routing) return {response, logprobs, versions, finish, routing};
  return {response, logprobs, versions, finish};
}

std::vector<ColumnData> empty_partial_columns(size_t rows, bool with_routing) {
  return partial_columns(std::vector<Completion>(rows), with_routing);
}

Completion saved_output(const std::vector<ColumnData>& columns, size_t row, bool with_routing) {
  auto values = [&](const char* name) {
    return find_column(columns, name).values.at(row).contiguous();
  };
  Completion saved;
  const torch::Tensor tokens = values(rl_columns::kPartialResponse).to(torch::kInt64);
  const torch::Tensor logprobs = values(rl_columns::kPartialLogprobs).to(torch::kFloat32);
  const torch::Tensor versions = values(rl_columns::kPartialVersions).to(torch::kInt64);
  check_input(logprobs.numel() == tokens.numel() && versions.numel() == tokens.numel(),
              std::to_string(tokens.numel()) + " tokens with " +
                  std::to_string(logprobs.numel()) + " log-probs and " +
                  std::to_string(versions.numel()) + " versions",
              "partial rollout row");
  saved.token_ids.assign(tokens.data_ptr<int64_t>(), tokens.data_ptr<int64_t>() + tokens.numel());
  saved.logprobs.assign(logprobs.data_ptr<float>(), logprobs.data_ptr<float>() + logprobs.numel());
  saved.policy_versions.assign(versions.data_ptr<int64_t>(),
                               versions.data_ptr<int64_t>() + versions.numel());
  const int64_t finish = values(rl_columns::kPartialFinish).to(torch::kInt64).item<int64_t>();
  check_input(finish >= static_cast<int64_t>(FinishReason::kNone) &&
                  finish <= static_cast<int64_t>(FinishReason::kAbort),
              "finish reason " + std::to_string(finish), "partial rollout row");
  saved.finish_reason = static_cast<FinishReason>(finish);
  if (with_routing) {
    const torch::Tensor routing = values(rl_columns::kPartialRoutedExperts).to(torch::kInt32);
    saved.routed_experts.assign(routing.data_ptr<int32_t>(),
                                routing.data_ptr<int32_t>() + routing.numel());
  }
  return saved;
}

std::vector<ColumnData> response_columns(const std::vector<Completion>& completions,
                                         bool with_routing) {
  std::vector<ColumnData> columns = rollout_columns(completions, with_routing);
  columns.erase(columns.begin());  // the prompt
  return columns;
}

std::vector<ColumnData> trajectory_columns(const std::vector<Trajectory>& trajectories) {
  std::vector<Completion> completions;
  ColumnData prompt{rl_columns::kPrompt, {}};
  ColumnData mask{rl_columns::kLossMask, {}};
  ColumnData starts{rl_columns::kTurnStarts, {}};
  ColumnData turn_rewards{rl_columns::kTurnRewards, {}};
  ColumnData reward{rl_columns::kTrajectoryReward, {}};
  ColumnData stats{rl_columns::kTrajectoryStats, {}};
  for (const Trajectory& t : trajectories) {
    completions.push_back(t.as_completion(0));
    prompt.values.push_back(
        torch::tensor(std::vector<int64_t>(t.prompt.begin(), t.prompt.end()), torch::kInt64));
    mask.values.push_back(torch::tensor(t.loss_mask, torch::kFloat32));
    starts.values.push_back(torch::tensor(t.turn_starts, torch::kInt64));
    turn_rewards.values.push_back(torch::tensor(t.turn_rewards, torch::kFloat32));
    reward.values.push_back(torch::tensor(
        {t.has_reward ? static_cast<float>(t.reward) : std::numeric_limits<float>::quiet_NaN()}));
    std::vector<float> row(kTrajectoryStatsWidth);
    row[kStatTurns] = static_cast<float>(t.turns());
    row[kStatToolCalls] = static_cast<float>(t.tool_calls);
    row[kStatToolErrors] = static_cast<float>(t.tool_errors);
    row[kStatWaitSeconds] = static_cast<float>(t.tool_wait_s);
    row[kStatEnd] = static_cast<float>(t.end);
    stats.values.push_back(torch::tensor(row, torch::kFloat32));
  }
  std::vector<ColumnData> columns = response_columns(completions);
  for (ColumnData* column : {&prompt, &mask, &starts, &turn_rewards, &reward, &stats}) {
    columns.push_back(std::move(*column));
  }
  return columns;
}

const ColumnData& find_column(const std::vector<ColumnData>& columns, const std::string& name) {
  for (const auto& column : columns) {
    if (column.name == name) return column;
  }
  throw Error("column \"" + name + "\" missing from a dock fetch", "dock");
}

TrainBatch to_train_batch(const Claim& claim, const std::vector<ColumnData>& columns,
                          const std::vector<std::string>& token_columns) {
  TrainBatch batch;
  if (claim.rows.empty()) {  // nothing claimed: an empty batch, whatever `columns` holds
    for (const auto& name : token_columns) batch.token_columns[name] = torch::zeros({0});
    return batch;
  }
  const ColumnData& prompts = find_column(columns, rl_columns::kPrompt);
  const ColumnData& responses = find_column(columns, rl_columns::kResponse);
  for (size_t i = 0; i < claim.rows.size(); ++i) {
    const torch::Tensor p = prompts.values[i].to(torch::kInt64).contiguous();
    const torch::Tensor r = responses.values[i].to(torch::kInt64).contiguous();
    batch.prompts.emplace_back(p.data_ptr<int64_t>(), p.data_ptr<int64_t>() + p.numel());
    batch.responses.emplace_back(r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + r.numel());
  }
  std::vector<std::string> packed = token_columns;
  const bool masked = std::any_of(columns.begin(), columns.end(), [](const ColumnData& c) {
    return c.name == rl_columns::kLossMask;
  });
  if (masked) packed.push_back(rl_columns::kLossMask);
  for (const auto& name : packed) {
    const ColumnData& column = find_column(columns, name);
    batch.token_columns[name] =
        column.values.empty() ? torch::zeros({0}) : torch::cat(column.values).to(torch::kFloat32);
  }
  batch.validate();
  return batch;
}

torch::Tensor routed_experts_column(const TrainBatch& batch, const ColumnData& column) {
  if (batch.num_rows() == 0) return torch::zeros({0, 0}, torch::kInt32);
  check_input(static_cast<int64_t>(column.values.size()) == batch.num_rows(),
              "one value per claimed row expected", "column " + column.name);
  int64_t width = -1;
  std::vector<torch::Tensor> rows;
  for (int64_t b = 0; b < batch.num_rows(); ++b) {
    const auto tokens = static_cast<int64_t>(batch.responses[b].size());
    const torch::Tensor& values = column.values[static_cast<size_t>(b)];
    if (tokens == 0) continue;
    check_input(values.numel() % tokens == 0 && (width < 0 || values.numel() / tokens == width),
                "row " + std::to_string(b) + " has " + std::to_string(values.numel()) +
                    " expert ids for " + std::to_string(tokens) + " tokens",
                "column " + column.name);
    width = values.numel() / tokens;
    rows.push_back(values.reshape({tokens, width}));
  }
  return rows.empty() ? torch::zeros({0, 0}, torch::kInt32) : torch::cat(rows);
}

}  // namespace aspen::pipeline
