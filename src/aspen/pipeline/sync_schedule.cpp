#include "aspen/pipeline/sync_schedule.h"

#include <ATen/Parallel.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <sstream>

#include "aspen/algo/algo.h"
#include "aspen/dock/in_process_transport.h"
#include "aspen/dock/transfer_dock.h"
#include "aspen/io/hf_config.h"
#include "aspen/io/jsonl.h"
#include "aspen/model/pretrained.h"
#include "aspen/pipeline/rl_rows.h"
#include "aspen/pipeline/sft_phase.h"
#include "aspen/rollout/engine.h"
#include "aspen/train/actor.h"
#include "aspen/train/model_copy.h"
#include "aspen/train/reference.h"
#include "aspen/util/file.h"

namespace aspen {
namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::map<std::string, torch::Tensor> weights_of(const QwenForCausalLM& model) {
  std::map<std::string, torch::Tensor> weights;
  for (const auto& [name, tensor] : model->hf_state()) weights[name] = tensor.detach();
  return weights;
}

EngineConfig engine_config(const TrainConfig& config, const RlSetup& setup) {
  EngineConfig engine;
  engine.kv_cache_bytes = config.rollout.kv_cache_mb << 20;
  engine.max_num_seqs = config.rollout.max_num_seqs;
  engine.max_num_batched_tokens = config.rollout.max_num_batched_tokens;
  engine.eos_token_ids = setup.eos_token_ids;
  engine.seed = config.train.seed;
  return engine;
}

GenerationRequest make_request(const RlSetup& setup, const TaskExample& example,
                               const SamplingParams& params, int64_t n, std::string id) {
  GenerationRequest request;
  request.id = std::move(id);
  request.prompt = setup.tokenizer->encode(example.prompt_text);
  request.params = params;
  request.n = n;
  return request;
}

double score_response(const RlSetup& setup, const TaskExample& example,
                      const std::vector<TokenId>& response) {
  RewardInput input{example.prompt_text,
                    setup.tokenizer->decode(response, /*skip_special_tokens=*/true),
                    example.ground_truth};
  return setup.verifier->score(input);
}

// Per-token advantages of the claimed rows, by the configured estimator.
torch::Tensor compute_advantages(const std::string& algorithm, double gamma,
                                 const torch::Tensor& scores, const torch::Tensor& group_ids,
                                 const std::vector<int64_t>& lengths) {
  const PackedSeqs packed = PackedSeqs::from_lengths(lengths);
  if (algorithm == "grpo" || algorithm == "dapo") return grpo_advantages(scores, group_ids, packed);
  if (algorithm == "dr_grpo") {
    GrpoOptions options;
    options.norm_by_std = false;
    return grpo_advantages(scores, group_ids, packed, options);
  }
  if (algorithm == "rloo") return rloo_advantages(scores, group_ids, packed);
  if (algorithm == "reinforce_pp_baseline") {
    return reinforce_pp_baseline_advantages(scores, group_ids, packed);
  }
  return reinforce_pp_advantages(outcome_token_rewards(scores, packed), packed, gamma).advantages;
}

class SyncRun {
 public:
  SyncRun(const TrainConfig& config, RlSetup& setup, std::string out_dir)
      : config_(config), setup_(setup), out_dir_(std::move(out_dir)), rng_(config.train.seed) {}

  nlohmann::json run();

 private:
  nlohmann::json iteration(int64_t index, RolloutEngine& engine, ActorTrainer& actor,
                           ReferencePolicy* reference, TransferDock& dock);
  std::vector<int64_t> next_prompts(int64_t count);

  const TrainConfig& config_;
  RlSetup& setup_;
  std::string out_dir_;
  std::mt19937_64 rng_;
  std::vector<int64_t> order_;  // shuffled train indices of the current epoch
  size_t cursor_ = 0;
  int64_t next_group_ = 0;
  int64_t version_ = 0;
  std::map<int64_t, int64_t> example_of_group_;
  int64_t samples_ = 0;
  int64_t trained_tokens_ = 0;
};

std::vector<int64_t> SyncRun::next_prompts(int64_t count) {
  std::vector<int64_t> picked;
  while (static_cast<int64_t>(picked.size()) < count) {
    if (cursor_ >= order_.size()) {
      order_.resize(setup_.train_examples.size());
      std::iota(order_.begin(), order_.end(), 0);
      std::shuffle(order_.begin(), order_.end(), rng_);
      cursor_ = 0;
    }
    picked.push_back(order_[cursor_++]);
  }
  return picked;
}

nlohmann::json SyncRun::iteration(int64_t index, RolloutEngine& engine, ActorTrainer& actor,
                                  ReferencePolicy* reference, TransferDock& dock) {
  const RolloutSection& rollout = config_.rollout;
  const AlgorithmSection& algorithm = config_.algorithm;
  nlohmann::json stages;
  const auto iteration_start = Clock::now();

  SamplingParams params;
  params.temperature = rollout.temperature;
  params.top_p = rollout.top_p;
  params.top_k = rollout.top_k;
  params.max_tokens = rollout.max_tokens;

  // 1-2. Rollout and reward, in rounds when DAPO dynamic sampling must refill the batch.
  std::set<int64_t> kept_groups;
  std::vector<double> all_scores;
  std::vector<int64_t> lengths;
  int64_t rounds = 0;
  double rollout_seconds = 0.0, reward_seconds = 0.0;
  int64_t rows_in_dock = 0;
  while (static_cast<int64_t>(kept_groups.size()) < rollout.prompts_per_iteration &&
         rounds < (algorithm.dynamic_sampling ? 4 : 1)) {
    ++rounds;
    auto start = Clock::now();
    const int64_t wanted = rollout.prompts_per_iteration - static_cast<int64_t>(kept_groups.size());
    std::vector<GenerationRequest> requests;
    for (int64_t example : next_prompts(wanted)) {
      const int64_t group = next_group_++;
      example_of_group_[group] = example;
      params.seed = config_.train.seed * 1000003ULL + static_cast<uint64_t>(group);
      requests.push_back(make_request(setup_, setup_.train_examples[example], params, rollout.n,
                                      std::to_string(group)));
    }
    const std::vector<Completion> completions = engine.generate(std::move(requests));
    std::vector<RowInfo> infos;
    for (const Completion& c : completions) {
      RowInfo info;
      info.group_id = std::stoll(c.request_id);  // requests are named by their group
      info.group_size = static_cast<int32_t>(rollout.n);
      info.tokens =
          static_cast<int64_t>(c.token_ids.size());  // per-token columns are response tokens
      info.version = c.policy_versions.empty() ? version_ : c.policy_versions.front();
      infos.push_back(info);
    }
    dock.put(infos, rollout_columns(completions));
    rows_in_dock += static_cast<int64_t>(completions.size());
    rollout_seconds += seconds_since(start);

    start = Clock::now();
    ClaimOptions claim_all;
    claim_all.max_rows = static_cast<int64_t>(completions.size());
    claim_all.min_rows = claim_all.max_rows;
    const Claim claim = dock.claim(rl_consumers::kReward, claim_all);
    const auto columns = dock.get(claim);
    const ColumnData& responses = find_column(columns, rl_columns::kResponse);
    ColumnData scores{rl_columns::kScores, {}};
    std::vector<RowId> ids;
    std::map<int64_t, std::vector<double>> group_scores;
    for (size_t i = 0; i < claim.rows.size(); ++i) {
      const torch::Tensor r = responses.values[i].contiguous();
      const std::vector<TokenId> response(r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + r.numel());
      const TaskExample& example =
          setup_.train_examples[example_of_group_.at(claim.rows[i].info.group_id)];
      double score = score_response(setup_, example, response);
      all_scores.push_back(score);
      lengths.push_back(r.numel());
      if (algorithm.overlong_buffer > 0) {
        OverlongBuffer buffer{rollout.max_tokens, algorithm.overlong_buffer,
                              algorithm.overlong_penalty};
        score += overlong_penalty(torch::tensor({r.numel()}, torch::kInt64), buffer).item<double>();
      }
      group_scores[claim.rows[i].info.group_id].push_back(score);
      scores.values.push_back(torch::tensor({static_cast<float>(score)}));
      ids.push_back(claim.rows[i].id);
    }
    dock.put_columns(ids, {scores});
    dock.ack(claim);
    for (const auto& [group, values] : group_scores) {
      const bool informative = *std::max_element(values.begin(), values.end()) !=
                               *std::min_element(values.begin(), values.end());
      if (informative || !algorithm.dynamic_sampling) kept_groups.insert(group);
    }
    reward_seconds += seconds_since(start);
  }
  stages["rollout"] = rollout_seconds;
  stages["reward"] = reward_seconds;

  ClaimOptions claim_all;
  claim_all.max_rows = rows_in_dock;
  claim_all.min_rows = rows_in_dock;

  // 3. Reference log-probs.
  if (reference != nullptr) {
    const auto start = Clock::now();
    const Claim claim = dock.claim(rl_consumers::kReference, claim_all);
    const TrainBatch batch = to_train_batch(claim, dock.get(claim), {});
    std::vector<RowId> ids;
    for (const auto& row : claim.rows) ids.push_back(row.id);
    dock.put_columns(ids, {{rl_columns::kRefLogprobs,
                            split_per_row(reference->compute_logprobs(batch), batch)}});
    dock.ack(claim);
    stages["reference"] = seconds_since(start);
  }

  // 4. Old log-probs: exactly on-policy updates reuse the rollout's (same weights).
  {
    const auto start = Clock::now();
    const Claim claim = dock.claim(rl_consumers::kOldLogprobs, claim_all);
    const auto columns = dock.get(claim);
    std::vector<RowId> ids;
    for (const auto& row : claim.rows) ids.push_back(row.id);
    const bool on_policy =
        config_.train.epochs == 1 &&
        (config_.train.mini_batch_size <= 0 || config_.train.mini_batch_size >= rows_in_dock);
    if (on_policy) {
      ColumnData old{rl_columns::kOldLogprobs,
                     find_column(columns, rl_columns::kRolloutLogprobs).values};
      dock.put_columns(ids, {old});
    } else {
      const TrainBatch batch = to_train_batch(claim, columns, {});
      dock.put_columns(ids, {{rl_columns::kOldLogprobs,
                              split_per_row(actor.compute_logprobs(batch).logprobs, batch)}});
    }
    dock.ack(claim);
    stages["old_logprobs"] = seconds_since(start);
  }

  // 5. Advantages, per complete group.
  {
    const auto start = Clock::now();
    ClaimOptions groups = claim_all;
    groups.whole_groups = true;
    const Claim claim = dock.claim(rl_consumers::kAdvantage, groups);
    const auto columns = dock.get(claim);
    const ColumnData& scores = find_column(columns, rl_columns::kScores);
    const ColumnData& responses = find_column(columns, rl_columns::kResponse);
    std::vector<float> score_values;
    std::vector<int64_t> group_ids, row_lengths;
    std::vector<RowId> ids;
    for (size_t i = 0; i < claim.rows.size(); ++i) {
      score_values.push_back(scores.values[i].item<float>());
      group_ids.push_back(claim.rows[i].info.group_id);
      row_lengths.push_back(responses.values[i].numel());
      ids.push_back(claim.rows[i].id);
    }
    const torch::Tensor advantages =
        compute_advantages(algorithm.name, algorithm.gamma, torch::tensor(score_values),
                           torch::tensor(group_ids, torch::kInt64), row_lengths);
    std::vector<torch::Tensor> per_row;
    int64_t offset = 0;
    for (int64_t length : row_lengths) {
      per_row.push_back(advantages.narrow(0, offset, length).clone());
      offset += length;
    }
    dock.put_columns(ids, {{rl_columns::kAdvantages, per_row}});
    dock.ack(claim);
    stages["advantage"] = seconds_since(start);
  }

  // 6. Actor update on the kept groups.
  ActorMetrics update;
  int64_t trained_rows = 0;
  {
    const auto start = Clock::now();
    const Claim claim = dock.claim(rl_consumers::kActorUpdate, claim_all);
    auto columns = dock.get(claim);
    Claim kept = claim;
    kept.rows.clear();
    std::vector<ColumnData> kept_columns;
    for (const auto& column : columns) kept_columns.push_back({column.name, {}});
    for (size_t i = 0; i < claim.rows.size(); ++i) {
      if (!kept_groups.count(claim.rows[i].info.group_id)) continue;
      kept.rows.push_back(claim.rows[i]);
      for (size_t c = 0; c < columns.size(); ++c)
        kept_columns[c].values.push_back(columns[c].values[i]);
    }
    std::vector<std::string> token_columns = {rl_columns::kOldLogprobs, rl_columns::kAdvantages};
    if (reference != nullptr) token_columns.push_back(rl_columns::kRefLogprobs);
    trained_rows = static_cast<int64_t>(kept.rows.size());
    if (trained_rows > 0) {
      const TrainBatch batch = to_train_batch(kept, kept_columns, token_columns);
      ActorUpdateOptions options;
      options.mini_batch_size = config_.train.mini_batch_size;
      options.epochs = config_.train.epochs;
      options.seed = config_.train.seed + static_cast<uint64_t>(index);
      options.policy.clip_ratio_low = algorithm.clip_ratio_low;
      options.policy.clip_ratio_high = algorithm.clip_ratio_high;
      if (algorithm.clip_ratio_c > 0) options.policy.clip_ratio_c = algorithm.clip_ratio_c;
      options.policy.agg.mode = parse_agg_mode(algorithm.loss_agg);
      options.kl_coef = algorithm.kl_coef;
      options.kl_estimator = parse_kl_estimator(algorithm.kl_estimator);
      options.entropy_coef = algorithm.entropy_coef;
      update = actor.update(batch, options);
      trained_tokens_ += batch.num_response_tokens();
    }
    dock.ack(claim);
    stages["update"] = seconds_since(start);
  }

  // 7. New weights to the rollout engine.
  {
    const auto start = Clock::now();
    engine.load_weights(++version_, weights_of(actor.model()));
    stages["publish"] = seconds_since(start);
  }

  samples_ += rows_in_dock;
  const double seconds = seconds_since(iteration_start);
  const torch::Tensor score_tensor = torch::tensor(all_scores, torch::kDouble);
  const torch::Tensor length_tensor = torch::tensor(lengths, torch::kDouble);
  int64_t correct = 0;
  for (double s : all_scores) correct += s >= 1.0 ? 1 : 0;
  return {{"iteration", index + 1},
          {"policy_version", version_},
          {"reward_mean", score_tensor.mean().item<double>()},
          {"reward_std", all_scores.size() > 1 ? score_tensor.std().item<double>() : 0.0},
          {"accuracy", static_cast<double>(correct) / std::max<size_t>(1, all_scores.size())},
          {"response_length_mean", length_tensor.mean().item<double>()},
          {"response_length_max", length_tensor.max().item<double>()},
          {"kl", update.kl_loss},
          {"approx_kl", update.approx_kl},
          {"entropy", update.entropy},
          {"clip_frac", update.clip_frac},
          {"grad_norm", update.grad_norm},
          {"lr", update.lr},
          {"policy_loss", update.policy_loss},
          {"rows", rows_in_dock},
          {"trained_rows", trained_rows},
          {"sampling_rounds", rounds},
          {"stage_seconds", stages},
          {"seconds", seconds},
          {"tokens_per_second", update.tokens / std::max(seconds, 1e-9)}};
}

nlohmann::json SyncRun::run() {
  fs::create_directories(out_dir_);
  write_file_atomic((fs::path(out_dir_) / "config.json").string(), config_.as_json().dump(2));
  std::ofstream metrics((fs::path(out_dir_) / "metrics.jsonl").string(), std::ios::trunc);
  const auto start = Clock::now();
  const int64_t max_tokens = config_.rollout.max_tokens;

  const double accuracy_initial = greedy_accuracy(setup_, setup_.eval_examples, max_tokens);
  run_sft_phase(config_, setup_, metrics);
  const double accuracy_before = greedy_accuracy(setup_, setup_.eval_examples, max_tokens);
  if (config_.logging.console) {
    std::cout << "eval greedy accuracy before RL: " << accuracy_before
              << " (untrained: " << accuracy_initial << ")\n"
              << std::flush;
  }
  write_jsonl(metrics, {{"phase", "eval"}, {"iteration", 0}, {"eval_accuracy", accuracy_before}});

  const TrainSection& train = config_.train;
  ActorOptions actor_options;
  actor_options.trainer = trainer_options(train, train.lr, train.iterations);
  actor_options.head.temperature = 1.0;
  ActorTrainer actor(setup_.model, actor_options);
  std::unique_ptr<ReferencePolicy> reference;
  if (config_.algorithm.kl_coef != 0.0) {
    ReferenceOptions options;
    reference = std::make_unique<ReferencePolicy>(setup_.model, options);
  }
  RolloutEngine engine(copy_model(setup_.model, torch::kFloat, torch::kCPU, /*trainable=*/false),
                       engine_config(config_, setup_), setup_.tokenizer);
  auto dock_state = std::make_shared<InProcessDock>(make_rl_schema(reference != nullptr),
                                                    DockControllerOptions{}, 1);
  TransferDock dock(std::make_shared<InProcessTransport>(dock_state, 0));

  double accuracy_after = accuracy_before;
  for (int64_t i = 0; i < train.iterations; ++i) {
    nlohmann::json line = iteration(i, engine, actor, reference.get(), dock);
    line["phase"] = "rl";
    const bool last = i + 1 == train.iterations;
    if (last || (config_.logging.eval_every > 0 && (i + 1) % config_.logging.eval_every == 0)) {
      accuracy_after = greedy_accuracy(setup_, setup_.eval_examples, max_tokens);
      line["eval_accuracy"] = accuracy_after;
    }
    write_jsonl(metrics, line);
    if (config_.logging.console) {
      std::ostringstream out;
      out << std::fixed << std::setprecision(3) << "iter " << std::setw(3) << i + 1 << "  reward "
          << line["reward_mean"].get<double>() << "  acc " << line["accuracy"].get<double>()
          << "  len " << std::setprecision(1) << line["response_length_mean"].get<double>()
          << std::setprecision(3) << "  kl " << line["approx_kl"].get<double>() << "  clip "
          << line["clip_frac"].get<double>() << "  " << std::setprecision(1)
          << line["seconds"].get<double>() << "s";
      if (line.contains("eval_accuracy"))
        out << "  eval_acc " << std::setprecision(3) << accuracy_after;
      std::cout << out.str() << "\n" << std::flush;
    }
  }

  const std::string final_dir = (fs::path(out_dir_) / "final").string();
  export_policy(setup_, final_dir);
  const double wall = seconds_since(start);
  nlohmann::json summary = {{"eval_accuracy_before_rl", accuracy_before},
                            {"eval_accuracy_after_rl", accuracy_after},
                            {"eval_accuracy_untrained", accuracy_initial},
                            {"iterations", train.iterations},
                            {"samples", samples_},
                            {"trained_tokens", trained_tokens_},
                            {"wall_seconds", wall},
                            {"tokens_per_second", trained_tokens_ / std::max(wall, 1e-9)},
                            {"final_model", final_dir},
                            {"metrics", (fs::path(out_dir_) / "metrics.jsonl").string()}};
  write_file_atomic((fs::path(out_dir_) / "summary.json").string(), summary.dump(2));
  return summary;
}

}  // namespace

double greedy_accuracy(RlSetup& setup, const std::vector<TaskExample>& examples,
                       int64_t max_tokens) {
  torch::NoGradGuard no_grad;
  EngineConfig config;
  config.eos_token_ids = setup.eos_token_ids;
  config.kv_cache_bytes = 64LL << 20;
  config.max_num_seqs = 256;
  RolloutEngine engine(setup.model, config, setup.tokenizer);
  SamplingParams params;
  params.temperature = 0.0;
  params.max_tokens = max_tokens;
  std::vector<GenerationRequest> requests;
  for (size_t i = 0; i < examples.size(); ++i) {
    requests.push_back(make_request(setup, examples[i], params, 1, std::to_string(i)));
  }
  const auto completions = engine.generate(std::move(requests));
  int64_t correct = 0;
  for (const Completion& c : completions) {
    correct += score_response(setup, examples[c.request_index], c.token_ids) >= 1.0 ? 1 : 0;
  }
  return examples.empty() ? 0.0
                          : static_cast<double>(correct) / static_cast<double>(examples.size());
}

nlohmann::json run_sync_schedule(const TrainConfig& config, RlSetup& setup,
                                 const std::string& out_dir) {
  if (config.pipeline.threads > 0) at::set_num_threads(config.pipeline.threads);
  return SyncRun(config, setup, out_dir).run();
}

}  // namespace aspen
