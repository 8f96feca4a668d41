#include "bench/reshard_bench.h"

#include <malloc.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>

#include "aspen/model/qwen_model.h"
#include "aspen/model/tp_layout.h"
#include "aspen/parallel/dist_env.h"
#include "aspen/parallel/launcher.h"
#include "aspen/parallel/pipeline_stages.h"
#include "aspen/parallel/process_group.h"
#include "aspen/parallel/resharder.h"
#include "aspen/parallel/swap_space.h"
#include "aspen/train/optimizer.h"
#include "aspen/util/error.h"
#include "aspen/util/memory_usage.h"
#include "aspen/util/seconds_since.h"
#include "bench/imports.h"

namespace aspen::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

ModelConfig bench_config(const ReshardBenchOptions& options) {
  ModelConfig c;
  c.family = ModelFamily::kQwen3;
  c.vocab_size = options.vocab_size;
  c.hidden_size = options.hidden_size;
  c.intermediate_size = options.hidden_size * 3;
  c.num_hidden_layers = options.num_layers;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 2;
  c.head_dim = options.hidden_size / 8;
  return c;
}

// Whether pipeline stage `stage` of `stages` holds `name` (docs/design.md "Pipeline
// parallelism": its decoder layers, the embedding on the first stage, the final norm and
// the head on the last, a tied embedding's copy on the last too).
bool stage_holds(const std::string& name, const ModelConfig& config, int stage, int stages) {
  const std::string prefix = "model.layers.";
  if (name.rfind(prefix, 0) == 0) {
    return stage_layers(config.num_hidden_layers, stages, stage, "bench reshard --train-pp")
        .contains(std::stoll(name.substr(prefix.size())));
  }
  if (name == "model.embed_tokens.weight") {
    return stage == 0 || (config.tie_word_embeddings && stage == stages - 1);
  }
  return stage == stages - 1;
}

// This rank's fp32 master shards (of its stage's tensors), built from the full model
// once and then the full model is dropped (and its memory returned) before anything is
// measured.
NamedParams training_shards(const ModelConfig& config, int tp_rank, int tp_size, int stage,
                            int stages) {
  NamedParams shards;
  {
    torch::NoGradGuard no_grad;
    torch::manual_seed(5);
    QwenForCausalLM full(config);
    for (const auto& [name, tensor] : full->hf_state()) {
      if (!stage_holds(name, config, stage, stages)) continue;
      torch::Tensor shard =
          take_shard(tensor, qwen_shard_spec(name, config), tp_rank, tp_size, name).clone();
      shards.emplace_back(name, shard.set_requires_grad(true));
    }
  }
  malloc_trim(0);
  return shards;
}

// The rollout's own working memory in the window, touched so it is resident.
void rollout_window(Resharder& resharder, const NamedParams& shards, int64_t workspace_mb) {
  auto weights = resharder.reshard(shards, 2);
  torch::Tensor workspace = torch::ones({workspace_mb * 1024 * 1024 / 4});
  (void)workspace.sum().item<float>();
  (void)weights->bytes();
}

}  // namespace

void ReshardBenchOptions::validate() const {
  check_input(train_dp >= 1 && train_pp >= 1 && train_tp >= 1 && infer_tp >= 1, "must be >= 1",
              "bench reshard --train-dp/--train-pp/--train-tp/--infer-tp");
  check_input(train_pp <= num_layers, "must not exceed --layers (a stage needs a layer)",
              "bench reshard --train-pp");
  check_input(hidden_size >= 64 && hidden_size % 64 == 0, "must be a multiple of 64",
              "bench reshard --hidden-size");
  check_input(num_layers >= 1, "must be >= 1", "bench reshard --layers");
  check_input(vocab_size >= 1, "must be >= 1", "bench reshard --vocab-size");
  check_input(rollout_workspace_mb >= 0, "must be >= 0", "bench reshard --rollout-workspace-mb");
  check_input(reps >= 1, "must be >= 1", "bench reshard --reps");
}

void run_reshard_bench_worker(const ReshardBenchOptions& options, const std::string& out_path) {
  options.validate();
  at::set_num_threads(1);
  const DistEnv env = read_dist_env();
  ProcessGroupHandle group = init_process_group(env);
  const ModelConfig config = bench_config(options);
  validate_tp_size(config, options.train_tp);
  validate_tp_size(config, options.infer_tp);
  ReshardPlan plan{options.train_dp, options.train_tp, options.infer_tp, torch::kBFloat16};
  plan.train_pp = options.train_pp;
  const int stage = (group.rank() / options.train_tp) % options.train_pp;
  NamedParams shards = training_shards(config, group.rank() % options.train_tp, options.train_tp,
                                       stage, options.train_pp);

  // A real AdamW state: one step on random gradients.
  OptimizerOptions optimizer_options;
  Optimizer optimizer(shards, optimizer_options);
  for (auto& [name, param] : shards) param.mutable_grad() = torch::randn_like(param);
  optimizer.step();
  NamedParams training_state = optimizer.state_tensors();
  for (const auto& grad : optimizer.grad_tensors()) training_state.push_back(grad);

  Resharder resharder(group, plan,
                      [&](const std::string& name) { return qwen_shard_spec(name, config); });
  resharder.reshard(shards, 0);  // warm-up: allocator and subgroup connections
  double reshard_seconds = 0.0;
  for (int i = 0; i < options.reps; ++i) {
    group.barrier();
    resharder.reshard(shards, 1 + i);
    reshard_seconds += resharder.last_stats().seconds;
  }
  const ReshardStats stats = resharder.last_stats();
  malloc_trim(0);

  group.barrier();
  int64_t peak_noswap = 0;
  bool exact = true;
  {
    PeakRssSampler peak;
    rollout_window(resharder, shards, options.rollout_workspace_mb);
    peak_noswap = peak.peak_bytes();
    exact = exact && peak.exact();
  }
  malloc_trim(0);

  group.barrier();
  SwapSpaceOptions swap_options;
  swap_options.directory = options.swap_dir;
  SwapSpace swap(swap_options);
  int64_t peak_swap = 0;
  int64_t peak_cycle = 0;
  double swap_out_seconds = 0.0;
  double swap_in_seconds = 0.0;
  int64_t swapped_bytes = 0;
  {
    PeakRssSampler cycle;
    auto start = Clock::now();
    swap.swap_out(training_state);
    swap_out_seconds = seconds_since(start);
    swapped_bytes = swap.swapped_bytes();
    {
      PeakRssSampler peak;
      rollout_window(resharder, shards, options.rollout_workspace_mb);
      peak_swap = peak.peak_bytes();
      exact = exact && peak.exact();
    }
    malloc_trim(0);
    start = Clock::now();
    swap.swap_in();
    swap_in_seconds = seconds_since(start);
    peak_cycle = cycle.peak_bytes();
  }
  // The optimizer is intact after the round trip: one more step must run.
  for (auto& [name, param] : shards) param.mutable_grad() = torch::randn_like(param);
  optimizer.step();
  group.barrier();

  if (group.rank() != 0) return;
  int64_t params = 0;
  for (const auto& [name, shard] : shards) params += shard.numel();
  const nlohmann::json result = {
      {"seconds", reshard_seconds / options.reps},
      {"bytes_moved", stats.bytes_moved},
      {"published_bytes", stats.bytes_published},
      {"peak_bytes_swap", peak_swap},
      {"peak_bytes_noswap", peak_noswap},
      {"peak_bytes_swap_cycle", peak_cycle},
      {"swapped_bytes", swapped_bytes},
      {"swap_out_seconds", swap_out_seconds},
      {"swap_in_seconds", swap_in_seconds},
      {"peak_exact", exact},
      {"workload",
       {{"train_dp", options.train_dp},
        {"train_pp", options.train_pp},
        {"train_tp", options.train_tp},
        {"infer_tp", options.infer_tp},
        {"hidden_size", options.hidden_size},
        {"num_layers", options.num_layers},
        {"vocab_size", options.vocab_size},
        {"rank0_shard_params", params},
        {"rollout_workspace_mb", options.rollout_workspace_mb},
        {"reps", options.reps}}}};
  std::ofstream(out_path) << result.dump() << "\n";
}

nlohmann::json run_reshard_bench(const ReshardBenchOptions& options, const std::string& self_exe) {
  options.validate();
  const fs::path out =
      fs::temp_directory_path() / ("aspen_bench_reshard_" + std::to_string(getpid()) + ".json");
  fs::remove(out);
  LaunchOptions launch_options;
  launch_options.nproc_per_node = options.train_dp * options.train_pp * options.train_tp;
  launch_options.master_port = 0;
  launch_options.command = {self_exe,
                            "bench",
                            "reshard",
                            "--worker",
                            "--out",
                            out.string(),
                            "--train-dp",
                            std::to_string(options.train_dp),
                            "--train-pp",
                            std::to_string(options.train_pp),
                            "--train-tp",
                            std::to_string(options.train_tp),
                            "--infer-tp",
                            std::to_string(options.infer_tp),
                            "--hidden-size",
                            std::to_string(options.hidden_size),
                            "--layers",
                            std::to_string(options.num_layers),
                            "--vocab-size",
                            std::to_string(options.vocab_size),
                            "--rollout-workspace-mb",
                            std::to_string(options.rollout_workspace_mb),
                            "--reps",
                            std::to_string(options.reps)};
  if (!options.swap_dir.empty()) {
    launch_options.command.push_back("--swap-dir");
    launch_options.command.push_back(options.swap_dir);
  }
  const int status = launch(launch_options);
  check_input(status == 0, "its rank processes exited with status " + std::to_string(status),
              "bench reshard");
  std::ifstream in(out);
  check_input(static_cast<bool>(in), "rank 0 wrote no result", "bench reshard");
  nlohmann::json result = nlohmann::json::parse(in);
  fs::remove(out);
  return result;
}

}  // namespace aspen::bench
