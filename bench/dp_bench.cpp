#include "bench/dp_bench.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>

#include "aspen/config/train_config.h"
#include "aspen/model/weights_init.h"
#include "aspen/parallel/device.h"
#include "aspen/parallel/dist_env.h"
#include "aspen/parallel/launcher.h"
#include "aspen/parallel/process_group.h"
#include "aspen/pipeline/dp_shares.h"
#include "aspen/train/actor.h"
#include "aspen/util/blas_threads.h"
#include "aspen/util/error.h"
#include "aspen/util/seconds_since.h"
#include "bench/imports.h"

namespace aspen::bench {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kGroupSize = 8;

ModelConfig bench_model_config(const std::string& model) {
  ModelConfig config;
  config.family = ModelFamily::kQwen3;
  config.max_position_embeddings = 1024;
  config.tie_word_embeddings = true;  // as the demo's built-in model
  config.torch_dtype = "float32";
  if (model == "tiny") {
    config.vocab_size = 64;
    config.hidden_size = 32;
    config.intermediate_size = 64;
    config.num_hidden_layers = 1;
    config.num_attention_heads = 2;
    config.num_key_value_heads = 1;
    config.head_dim = 16;
    return config;
  }
  // The demo's built-in model (its defaults are the demo's configuration).
  const ModelSection demo;
  config.vocab_size = demo.tokenizer_vocab;
  config.hidden_size = demo.hidden_size;
  config.intermediate_size = demo.intermediate_size;
  config.num_hidden_layers = demo.num_layers;
  config.num_attention_heads = demo.num_heads;
  config.num_key_value_heads = demo.num_kv_heads;
  config.head_dim = demo.head_dim;
  return config;
}

// Rows in groups sharing a prompt; responses mostly short with a long tail (what
// makes token balancing across ranks matter). mt19937_64's raw output is fixed by the
// standard, so the batch is the same on every platform and in every process.
TrainBatch bench_batch(const DpBenchOptions& options, int64_t vocab) {
  std::mt19937_64 rng(options.seed);
  const bool tiny = options.model == "tiny";
  TrainBatch batch;
  std::vector<int64_t> prompt;
  std::vector<float> advantages;
  for (int64_t row = 0; row < options.rows; ++row) {
    if (row % kGroupSize == 0) {
      prompt.assign(static_cast<size_t>(tiny ? 4 : 16 + rng() % 17), 0);
      for (auto& id : prompt) id = static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab));
    }
    const bool long_tail = rng() % 100 < 15;
    const int64_t length = tiny ? 2 + static_cast<int64_t>(rng() % 6)
                                : long_tail ? 64 + static_cast<int64_t>(rng() % 65)
                                            : 4 + static_cast<int64_t>(rng() % 29);
    std::vector<int64_t> response(static_cast<size_t>(length));
    for (auto& id : response) id = static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab));
    batch.prompts.push_back(prompt);
    batch.responses.push_back(response);
    // GRPO: one advantage per row, spread around 0 within the group.
    const float advantage = static_cast<float>(static_cast<double>(rng() % 2001) / 1000.0 - 1.0);
    advantages.insert(advantages.end(), static_cast<size_t>(length), advantage);
  }
  batch.token_columns[columns::kAdvantages] = torch::tensor(advantages);
  return batch;
}

ActorOptions bench_actor_options(const DpBenchOptions& options) {
  // The demo's train section: lr, no weight decay, clip 1.0, fp32 compute.
  const TrainSection demo;
  ActorOptions actor;
  actor.trainer.optimizer.lr = demo.lr;
  actor.trainer.optimizer.weight_decay = demo.weight_decay;
  actor.trainer.optimizer.max_grad_norm = demo.grad_clip;
  actor.trainer.max_tokens_per_micro_batch = options.micro_batch_tokens;
  return actor;
}

int64_t batch_tokens(const TrainBatch& batch) {
  int64_t tokens = 0;
  for (int64_t b = 0; b < batch.num_rows(); ++b) {
    tokens += static_cast<int64_t>(batch.prompts[b].size() + batch.responses[b].size());
  }
  return tokens;
}

// Training-token imbalance of the DP shares: max/mean - 1 of prompt + response tokens.
double share_imbalance(const std::vector<TrainBatch>& shares) {
  int64_t total = 0, largest = 0;
  for (const auto& share : shares) {
    const int64_t tokens = batch_tokens(share);
    total += tokens;
    largest = std::max(largest, tokens);
  }
  if (total == 0) return 0.0;
  return static_cast<double>(largest) * static_cast<double>(shares.size()) /
             static_cast<double>(total) - 1.0;
}

std::vector<std::string> worker_arguments(const DpBenchOptions& options) {
  return {"--model", options.model,
          "--rows", std::to_string(options.rows),
          "--updates", std::to_string(options.updates),
          "--warmup", std::to_string(options.warmup),
          "--mini-batch-size", std::to_string(options.mini_batch_size),
          "--micro-batch-tokens", std::to_string(options.micro_batch_tokens),
          "--seed", std::to_string(options.seed),
          "--device", options.device};
}

nlohmann::json run_configuration(const DpBenchOptions& options, const std::string& self_exe,
                                 const std::string& name, int processes, int threads) {
  const fs::path out = fs::temp_directory_path() /
                       ("aspen_bench_dp_" + std::to_string(getpid()) + "_" + name + ".json");
  fs::remove(out);
  LaunchOptions launch_options;
  launch_options.nproc_per_node = processes;
  launch_options.master_port = 0;
  launch_options.command = {self_exe, "bench", "dp", "--worker", "--threads",
                            std::to_string(threads), "--out", out.string()};
  for (const auto& argument : worker_arguments(options)) launch_options.command.push_back(argument);
  const int status = launch(launch_options);
  check_input(status == 0, "its processes exited with status " + std::to_string(status),
              "bench dp configuration " + name);
  std::ifstream in(out);
  check_input(static_cast<bool>(in), "rank 0 wrote no result", "bench dp configuration " + name);
  nlohmann::json result = nlohmann::json::parse(in);
  fs::remove(out);
  return result;
}

double ratio(const nlohmann::json& a, const nlohmann::json& b) {
  return a["tokens_per_s"].get<double>() / std::max(b["tokens_per_s"].get<double>(), 1e-12);
}

}  // namespace

void DpBenchOptions::validate() const {
  check_input(model == "demo" || model == "tiny", "unknown model '" + model + "'",
              "bench dp --model", "use demo or tiny");
  check_input(rows >= 1, "must be >= 1", "bench dp --rows");
  check_input(updates >= 1, "must be >= 1", "bench dp --updates");
  check_input(warmup >= 0, "must be >= 0", "bench dp --warmup");
  check_input(micro_batch_tokens >= 1, "must be >= 1", "bench dp --micro-batch-tokens");
  parse_device_spec(device, "bench dp --device");
}

void run_dp_bench_worker(const DpBenchOptions& options, int threads, const std::string& out_path) {
  options.validate();
  check_input(threads >= 1, "must be >= 1", "bench dp --threads");
  // Both pools, deliberately: torch's intra-op threads and OpenBLAS's own.
  at::set_num_threads(threads);
  set_blas_threads(threads);

  std::optional<ProcessGroupHandle> group;
  if (dist_env_present()) {
    const DistEnv env = read_dist_env();
    if (env.world_size > 1) group = init_process_group(env);
  }
  const int world = group ? group->world_size() : 1;
  const int rank = group ? group->rank() : 0;

  const ModelConfig config = bench_model_config(options.model);
  const TrainBatch global = bench_batch(options, config.vocab_size);
  const std::vector<TrainBatch> shares =
      world > 1 ? split_balanced(global, world) : std::vector<TrainBatch>{global};
  TrainBatch local = shares.at(static_cast<size_t>(rank));

  ActorOptions actor_options = bench_actor_options(options);
  actor_options.data_parallel.group = group;
  const torch::Device device =
      resolve_device(parse_device_spec(options.device, "bench dp --device"),
                     dist_env_present() ? read_dist_env().local_rank : 0, "bench dp --device");
  ActorTrainer actor(make_random_model(config, options.seed + 17, torch::kFloat, device),
                     actor_options);
  local.token_columns[columns::kOldLogprobs] = actor.compute_logprobs(local).logprobs;
  ActorUpdateOptions update;
  update.mini_batch_size = options.mini_batch_size;

  for (int64_t i = 0; i < options.warmup; ++i) actor.update(local, update);
  if (group) group->barrier();
  const auto start = std::chrono::steady_clock::now();
  int64_t tokens = 0;
  for (int64_t i = 0; i < options.updates; ++i) tokens += actor.update(local, update).tokens;
  if (group) group->barrier();  // the slowest rank ends the measurement
  const double seconds =
      seconds_since(start);
  if (rank != 0) return;
  nlohmann::json result = {{"tokens_per_s", static_cast<double>(tokens) / seconds},
                           {"seconds", seconds},
                           {"tokens", tokens},
                           {"updates", options.updates},
                           {"processes", world},
                           {"threads_per_process", at::get_num_threads()},
                           {"blas_threads", blas_threads()},
                           {"device", device.str()}};
  if (world > 1) result["imbalance"] = share_imbalance(shares);
  std::ofstream(out_path) << result.dump();
}

nlohmann::json run_dp_bench(const DpBenchOptions& options, const std::string& self_exe) {
  options.validate();
  double load[1] = {0.0};
  const bool have_load = getloadavg(load, 1) == 1;
  nlohmann::json result;
  result["one_proc_one_thread"] = run_configuration(options, self_exe, "one_proc_one_thread", 1, 1);
  result["one_proc_two_threads"] =
      run_configuration(options, self_exe, "one_proc_two_threads", 1, 2);
  result["two_procs_one_thread"] =
      run_configuration(options, self_exe, "two_procs_one_thread", 2, 1);
  result["speedup_dp_vs_threads"] =
      ratio(result["two_procs_one_thread"], result["one_proc_two_threads"]);
  result["speedup_dp_vs_one_thread"] =
      ratio(result["two_procs_one_thread"], result["one_proc_one_thread"]);
  result["speedup_threads_vs_one_thread"] =
      ratio(result["one_proc_two_threads"], result["one_proc_one_thread"]);
  const ModelConfig config = bench_model_config(options.model);
  const TrainBatch batch = bench_batch(options, config.vocab_size);
  int64_t parameters = 0;
  for (const auto& p : make_random_model(config, options.seed + 17)->parameters()) {
    parameters += p.numel();
  }
  result["workload"] = {{"model", options.model},
                        {"parameters", parameters},
                        {"dtype", "fp32"},
                        {"rows", options.rows},
                        {"tokens_per_update", batch_tokens(batch)},
                        {"response_tokens_per_update", batch.num_response_tokens()},
                        {"mini_batch_size", options.mini_batch_size},
                        {"micro_batch_tokens", options.micro_batch_tokens},
                        {"warmup_updates", options.warmup},
                        {"timed_updates", options.updates}};
  if (have_load) result["load_average_1m"] = load[0];
  return result;
}

}  // namespace aspen::bench
