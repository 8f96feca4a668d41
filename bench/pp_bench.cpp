#include "bench/pp_bench.h"

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>

#include "aspen/model/qwen_model.h"
#include "aspen/model/weights_init.h"
#include "aspen/parallel/dist_env.h"
#include "aspen/parallel/launcher.h"
#include "aspen/parallel/pipeline_stages.h"
#include "aspen/parallel/process_group.h"
#include "aspen/train/micro_batches.h"
#include "aspen/train/pipeline_runner.h"
#include "aspen/util/blas_threads.h"
#include "aspen/util/error.h"
#include "aspen/util/seconds_since.h"
#include "bench/imports.h"

namespace aspen::bench {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kVocab = 512;
constexpr int64_t kHeadDim = 64;
constexpr int64_t kMaxStages = 16;
constexpr int64_t kMaxMicroBatches = 64;

ModelConfig pp_model_config(const PpBenchOptions& options) {
  ModelConfig config;
  config.family = ModelFamily::kQwen3;
  config.vocab_size = kVocab;
  config.hidden_size = options.hidden;
  config.intermediate_size = 3 * options.hidden;
  config.num_hidden_layers = options.layers;
  config.num_attention_heads = options.hidden / kHeadDim;
  config.num_key_value_heads = std::max<int64_t>(1, config.num_attention_heads / 2);
  config.head_dim = kHeadDim;
  config.max_position_embeddings = 4096;
  config.tie_word_embeddings = false;
  config.torch_dtype = "float32";
  return config;
}

// Rows of 1/8 to 1/3 of a micro-batch each (a quarter prompt, the rest response), about
// m x tokens in all, seeded: every stage draws the same batch. mt19937_64's output is
// fixed by the standard.
TrainBatch pp_batch(const PpBenchOptions& options, int64_t micro_batches) {
  std::mt19937_64 rng(options.seed + static_cast<uint64_t>(micro_batches));
  const int64_t low = std::max<int64_t>(2, options.tokens / 8);
  const int64_t high = std::max<int64_t>(low, options.tokens / 3);
  TrainBatch batch;
  int64_t total = 0;
  while (total < micro_batches * options.tokens) {
    const int64_t length = low + static_cast<int64_t>(rng() % static_cast<uint64_t>(high - low + 1));
    const int64_t prompt = std::max<int64_t>(1, length / 4);
    std::vector<int64_t> ids(static_cast<size_t>(length));
    for (auto& id : ids) id = static_cast<int64_t>(rng() % static_cast<uint64_t>(kVocab));
    batch.prompts.emplace_back(ids.begin(), ids.begin() + prompt);
    batch.responses.emplace_back(ids.begin() + prompt, ids.end());
    total += length;
  }
  return batch;
}

// The balanced micro-batcher's packing into exactly `count` micro-batches: the smallest
// budget at or above total / count for which it plans no more than `count`.
std::vector<MicroBatch> pp_micro_batches(const TrainBatch& batch, int64_t count) {
  std::vector<int64_t> lengths, rows;
  int64_t total = 0;
  for (int64_t b = 0; b < batch.num_rows(); ++b) {
    lengths.push_back(static_cast<int64_t>(batch.prompts[b].size() + batch.responses[b].size()));
    rows.push_back(b);
    total += lengths.back();
  }
  int64_t budget = std::max<int64_t>(1, total / count);
  while (static_cast<int64_t>(plan_micro_batches(lengths, budget).size()) > count) ++budget;
  std::vector<MicroBatch> planned = make_micro_batches(batch, rows, budget, torch::kCPU);
  check_input(static_cast<int64_t>(planned.size()) == count,
              "the micro-batcher made " + std::to_string(planned.size()) + " micro-batches of " +
                  std::to_string(total) + " tokens, not " + std::to_string(count),
              "bench pp --micro-batches", "use more --tokens per micro-batch");
  return planned;
}

// This thread's time on a CPU (CLOCK_THREAD_CPUTIME_ID: exact up to now; schedstat's
// first field lags by up to a scheduler tick while the thread runs) and its time
// runnable but waiting for one, preempted by other processes (/proc/thread-self/
// schedstat's second field, nanoseconds: added when the thread gets the CPU back, so
// exact across a schedule, which ends running).
struct SchedTimes {
  double running_s = 0;
  double runnable_s = 0;
};

SchedTimes thread_sched_times() {
  timespec cpu{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
  std::ifstream in("/proc/thread-self/schedstat");
  double running_ns = 0, runnable_ns = 0;
  in >> running_ns >> runnable_ns;
  check_input(static_cast<bool>(in), "cannot read /proc/thread-self/schedstat", "bench pp");
  return {static_cast<double>(cpu.tv_sec) + 1e-9 * static_cast<double>(cpu.tv_nsec),
          runnable_ns * 1e-9};
}

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
}

std::string joined(const std::vector<int64_t>& values) {
  std::string text;
  for (size_t i = 0; i < values.size(); ++i) text += (i ? "," : "") + std::to_string(values[i]);
  return text;
}

// One (p, m) configuration in this stage's process; the JSON run on rank 0.
nlohmann::json run_micro_batch_count(QwenForCausalLM& model,
                                     std::optional<ProcessGroupHandle>& group,
                                     const PpBenchOptions& options, int64_t count) {
  const std::vector<MicroBatch> mbs = pp_micro_batches(pp_batch(options, count), count);
  int64_t tokens = 0, response_tokens = 0;
  nlohmann::json sizes = nlohmann::json::array();
  for (const MicroBatch& mb : mbs) {
    tokens += mb.num_tokens;
    response_tokens += mb.num_response_tokens;
    sizes.push_back(mb.num_tokens);
  }
  const StageLoss loss = [&](QwenForCausalLM& m, size_t i, const torch::Tensor& hidden) {
    const TokenLogprobs head =
        m->head_logprobs(hidden.index_select(0, mbs[i].hidden_index), mbs[i].target_ids);
    return -head.logprobs.sum() / static_cast<double>(response_tokens);
  };
  auto barrier = [&] {
    if (group) group->barrier();
  };
  double running = 0.0, runnable = 0.0, wall = 0.0;
  for (int64_t r = 0; r < options.warmup + options.repeats; ++r) {
    model->zero_grad();
    barrier();
    const auto start = std::chrono::steady_clock::now();
    const SchedTimes before = thread_sched_times();
    run_one_f_one_b(model, mbs, loss);
    const SchedTimes after = thread_sched_times();
    barrier();  // the schedule ends when its last stage does
    const double seconds = seconds_since(start);
    if (r < options.warmup) continue;
    running += after.running_s - before.running_s;
    runnable += after.runnable_s - before.runnable_s;
    wall += seconds;
  }
  // Every stage's seconds, to rank 0 (whose wall is the schedule's: barriers on both ends).
  std::vector<std::pair<double, double>> stage_times = {{running, runnable}};
  if (group) {
    stage_times.clear();
    const torch::Tensor mine = torch::tensor({running, runnable}, torch::kDouble);
    for (const torch::Tensor& t : group->all_gather(mine)) {
      stage_times.emplace_back(t[0].item<double>(), t[1].item<double>());
    }
  }
  const auto p = static_cast<double>(stage_times.size());
  const auto m = static_cast<double>(count);
  nlohmann::json busy_fractions = nlohmann::json::array(), cpu_fractions = nlohmann::json::array();
  double mean_busy = 0.0, mean_cpu = 0.0;
  for (const auto& [stage_running, stage_runnable] : stage_times) {
    busy_fractions.push_back((stage_running + stage_runnable) / wall);
    cpu_fractions.push_back(stage_running / wall);
    mean_busy += (stage_running + stage_runnable) / wall / p;
    mean_cpu += stage_running / wall / p;
  }
  const double theory = (p - 1.0) / (m + p - 1.0);
  const double measured = 1.0 - mean_busy;
  nlohmann::json run = {{"stages", stage_times.size()},
                        {"micro_batches", count},
                        {"tokens_per_step", tokens},
                        {"micro_batch_tokens", sizes},
                        {"seconds_per_step", wall / static_cast<double>(options.repeats)},
                        {"tokens_per_s", static_cast<double>(tokens * options.repeats) / wall},
                        {"bubble_measured", measured},
                        {"bubble_theory", theory},
                        {"bubble_cpu", 1.0 - mean_cpu},
                        {"stage_busy_fraction", busy_fractions},
                        {"stage_cpu_fraction", cpu_fractions},
                        {"oversubscribed", static_cast<int>(stage_times.size()) > usable_cores()}};
  if (theory > 0) run["bubble_relative_error"] = measured / theory - 1.0;
  return run;
}

nlohmann::json run_stage_count(const PpBenchOptions& options, const std::string& self_exe,
                               int64_t stages) {
  const fs::path out = fs::temp_directory_path() / ("aspen_bench_pp_" + std::to_string(getpid()) +
                                                    "_" + std::to_string(stages) + ".json");
  fs::remove(out);
  LaunchOptions launch_options;
  launch_options.nproc_per_node = static_cast<int>(stages);
  launch_options.master_port = 0;
  launch_options.command = {self_exe, "bench", "pp", "--worker", "--out", out.string(),
                            "--stages", std::to_string(stages),
                            "--micro-batches", joined(options.micro_batches),
                            "--layers", std::to_string(options.layers),
                            "--hidden", std::to_string(options.hidden),
                            "--tokens", std::to_string(options.tokens),
                            "--repeats", std::to_string(options.repeats),
                            "--warmup", std::to_string(options.warmup),
                            "--seed", std::to_string(options.seed)};
  const std::string what = "bench pp with " + std::to_string(stages) + " stages";
  const int status = launch(launch_options);
  check_input(status == 0, "its processes exited with status " + std::to_string(status), what);
  std::ifstream in(out);
  check_input(static_cast<bool>(in), "rank 0 wrote no result", what);
  nlohmann::json runs = nlohmann::json::parse(in);
  fs::remove(out);
  return runs;
}

}  // namespace

void PpBenchOptions::validate() const {
  check_input(!stages.empty(), "must list at least one stage count", "bench pp --stages");
  for (int64_t p : stages) {
    check_input(p >= 1 && p <= std::min(layers, kMaxStages),
                "has " + std::to_string(p) + ", outside [1, min(--layers, " +
                    std::to_string(kMaxStages) + ")]",
                "bench pp --stages", "every stage needs a layer");
  }
  check_input(!micro_batches.empty(), "must list at least one count", "bench pp --micro-batches");
  for (int64_t m : micro_batches) {
    check_input(m >= 1 && m <= kMaxMicroBatches,
                "has " + std::to_string(m) + ", outside [1, " + std::to_string(kMaxMicroBatches) + "]",
                "bench pp --micro-batches");
  }
  check_input(layers >= 1, "must be >= 1", "bench pp --layers");
  check_input(hidden >= kHeadDim && hidden % kHeadDim == 0,
              "is " + std::to_string(hidden) + ", not a positive multiple of " +
                  std::to_string(kHeadDim),
              "bench pp --hidden", "heads are 64 wide");
  check_input(tokens >= 8, "must be >= 8", "bench pp --tokens");
  check_input(repeats >= 1, "must be >= 1", "bench pp --repeats");
  check_input(warmup >= 0, "must be >= 0", "bench pp --warmup");
}

void run_pp_bench_worker(const PpBenchOptions& options, const std::string& out_path) {
  options.validate();
  // One thread per stage, in both pools (torch's setting does not reach OpenBLAS'): the
  // busy-time measurement needs all of a stage's compute on its main thread.
  at::set_num_threads(1);
  set_blas_threads(1);
  std::optional<ProcessGroupHandle> group;
  if (dist_env_present()) {
    const DistEnv env = read_dist_env();
    if (env.world_size > 1) group = init_process_group(env);
  }
  const PipelineStages pp = group ? PipelineStages::over(*group) : PipelineStages{};
  const ModelConfig config = pp_model_config(options);
  QwenForCausalLM model(config, TensorParallel{}, ExpertParallel{}, pp);
  init_weights(model, options.seed + 17);
  nlohmann::json runs = nlohmann::json::array();
  for (int64_t count : options.micro_batches) {
    runs.push_back(run_micro_batch_count(model, group, options, count));
  }
  if (pp.stage == 0) std::ofstream(out_path) << runs.dump();
}

nlohmann::json run_pp_bench(const PpBenchOptions& options, const std::string& self_exe) {
  options.validate();
  double load[1] = {0.0};
  const bool have_load = getloadavg(load, 1) == 1;
  nlohmann::json runs = nlohmann::json::array();
  for (int64_t stages : options.stages) {
    for (const auto& run : run_stage_count(options, self_exe, stages)) runs.push_back(run);
  }
  const ModelConfig config = pp_model_config(options);
  int64_t parameters = 0;
  for (const auto& p : QwenForCausalLM(config)->parameters()) parameters += p.numel();
  nlohmann::json result = {
      {"runs", runs},
      {"model", {{"family", "qwen3"},
                 {"layers", config.num_hidden_layers},
                 {"hidden", config.hidden_size},
                 {"intermediate", config.intermediate_size},
                 {"heads", config.num_attention_heads},
                 {"kv_heads", config.num_key_value_heads},
                 {"vocab", config.vocab_size},
                 {"parameters", parameters},
                 {"dtype", "fp32"}}},
      {"micro_batch_tokens_target", options.tokens},
      {"cores", usable_cores()},
      {"threads_per_stage", 1},
      {"repeats", options.repeats},
      {"warmup", options.warmup},
      {"bubble_definition",
       "per stage, the fraction of the schedule's wall seconds (barrier to barrier) its "
       "main thread spent asleep inside the 1F1B runner - neither running nor runnable "
       "(/proc/thread-self/schedstat): waiting for a neighbour's message - averaged over "
       "stages; bubble_cpu counts runnable-but-preempted time as idle too"}};
  if (have_load) result["load_average_1m"] = load[0];
  return result;
}

}  // namespace aspen::bench
