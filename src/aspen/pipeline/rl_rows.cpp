#include "aspen/pipeline/rl_rows.h"

#include "aspen/util/error.h"

namespace aspen {

DockSchema make_rl_schema(const RlSchemaOptions& options) {
  using namespace rl_columns;
  std::vector<ColumnSpec> columns = {{kPrompt, torch::kInt64, ColumnKind::kPerRow},
                                     {kResponse, torch::kInt64, ColumnKind::kPerToken},
                                     {kRolloutLogprobs, torch::kFloat32, ColumnKind::kPerToken},
                                     {kScores, torch::kFloat32, ColumnKind::kPerRow},
                                     {kOldLogprobs, torch::kFloat32, ColumnKind::kPerToken},
                                     {kAdvantages, torch::kFloat32, ColumnKind::kPerToken}};
  ConsumerSpec advantage{rl_consumers::kAdvantage, {kResponse, kScores}};
  ConsumerSpec actor{rl_consumers::kActorUpdate,
                     {kPrompt, kResponse, kOldLogprobs, kAdvantages, kRolloutLogprobs}};
  std::vector<ConsumerSpec> consumers = {
      {rl_consumers::kReward, {kPrompt, kResponse}},
      {rl_consumers::kOldLogprobs, {kPrompt, kResponse, kRolloutLogprobs}}};
  if (options.with_reference) {
    columns.push_back({kRefLogprobs, torch::kFloat32, ColumnKind::kPerToken});
    consumers.push_back({rl_consumers::kReference, {kPrompt, kResponse}});
    actor.columns.push_back(kRefLogprobs);
    if (options.kl_in_reward) {
      advantage.columns.push_back(kRefLogprobs);
      advantage.columns.push_back(kOldLogprobs);
    }
  }
  if (options.with_critic) {
    columns.push_back({kValues, torch::kFloat32, ColumnKind::kPerToken});
    columns.push_back({kReturns, torch::kFloat32, ColumnKind::kPerToken});
    consumers.push_back({rl_consumers::kValues, {kPrompt, kResponse}});
    advantage.columns.push_back(kValues);
    consumers.push_back({rl_consumers::kCriticUpdate, {kPrompt, kResponse, kValues, kReturns}});
  }
  consumers.push_back(advantage);
  consumers.push_back(actor);
  if (options.with_dispatch) {
    columns.push_back({kExample, torch::kInt64, ColumnKind::kPerRow});
    columns.push_back({kSampleIndex, torch::kInt64, ColumnKind::kPerRow});
    columns.push_back({kVerifierScore, torch::kFloat32, ColumnKind::kPerRow});
    consumers.push_back({rl_consumers::kRollout, {kPrompt, kSampleIndex}});
    consumers[0].columns.push_back(kExample);  // reward: the example's ground truth
    consumers.push_back({rl_consumers::kBatch, {kScores, kVerifierScore}});
  }
  return DockSchema(columns, consumers);
}

std::vector<ColumnData> rollout_columns(const std::vector<Completion>& completions) {
  ColumnData prompt{rl_columns::kPrompt, {}};
  ColumnData response{rl_columns::kResponse, {}};
  ColumnData logprobs{rl_columns::kRolloutLogprobs, {}};
  for (const Completion& c : completions) {
    std::vector<int64_t> p(c.prompt_token_ids.begin(), c.prompt_token_ids.end());
    std::vector<int64_t> r(c.token_ids.begin(), c.token_ids.end());
    prompt.values.push_back(torch::tensor(p, torch::kInt64));
    response.values.push_back(torch::tensor(r, torch::kInt64));
    logprobs.values.push_back(torch::tensor(c.logprobs, torch::kFloat32));
  }
  return {prompt, response, logprobs};
}

std::vector<ColumnData> response_columns(const std::vector<Completion>& completions) {
  std::vector<ColumnData> columns = rollout_columns(completions);
  columns.erase(columns.begin());  // the prompt
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
  for (const auto& name : token_columns) {
    const ColumnData& column = find_column(columns, name);
    batch.token_columns[name] =
        column.values.empty() ? torch::zeros({0}) : torch::cat(column.values).to(torch::kFloat32);
  }
  batch.validate();
  return batch;
}

std::vector<torch::Tensor> split_per_row(const torch::Tensor& packed, const TrainBatch& batch) {
  const std::vector<int64_t> offsets = batch.response_offsets();
  std::vector<torch::Tensor> rows;
  for (size_t b = 0; b + 1 < offsets.size(); ++b) {
    rows.push_back(packed.narrow(0, offsets[b], offsets[b + 1] - offsets[b]).clone());
  }
  return rows;
}

}  // namespace aspen
