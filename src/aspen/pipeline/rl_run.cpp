#include "aspen/pipeline/rl_run.h"

#include <ATen/Parallel.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include "aspen/config/pipeline_parallel_checks.h"
#include "aspen/io/jsonl.h"
#include "aspen/model/tp_layout.h"
#include "aspen/parallel/dist_env.h"
#include "aspen/parallel/pipeline_stages.h"
#include "aspen/parallel/process_group.h"
#include "aspen/parallel/tensor_parallel.h"
#include "aspen/pipeline/checkpoint.h"
#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/trajectory_eval.h"
#include "aspen/pipeline/iteration_engine.h"
#include "aspen/pipeline/pass_at_k.h"
#include "aspen/pipeline/resume_check.h"
#include "aspen/pipeline/lora_policy.h"
#include "aspen/pipeline/sft_phase.h"
#include "aspen/report/console_progress.h"
#include "aspen/report/finite_metrics.h"
#include "aspen/report/tensorboard_writer.h"
#include "aspen/report/trace_writer.h"
#include "aspen/util/error.h"
#include "aspen/util/file.h"
#include "aspen/util/log.h"
#include "aspen/util/seconds_since.h"

namespace aspen::pipeline {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Keeps the metrics lines written up to `iteration` (SFT and eval lines before RL,
// RL lines with iteration <= it), so the resumed run appends where it left off.
void cut_metrics(const std::string& path, int64_t iteration) {
  std::vector<std::string> kept;
  if (fs::exists(path)) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      const nlohmann::json json = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (json.is_discarded()) continue;  // a line torn by the interruption
      if (json.value("phase", "") == "rl" && json.value("iteration", int64_t{0}) > iteration) break;
      kept.push_back(line);
    }
  }
  std::string text;
  for (const auto& line : kept) text += line + "\n";
  write_file_atomic(path, text);
}

std::string rank_trace_path(const std::string& path, int rank) {
  return path + ".rank-" + std::to_string(rank);
}

// Rank 0's trace gets every other rank's timeline (one process row per rank, their
// tracks per role and instance), each as soon as that rank has written it (up to 10 s:
// a rank that failed under pipeline.on_instance_failure: regenerate never does).
void merge_rank_traces(const std::string& path, ProcessGroupHandle& world) {
  std::vector<std::string> parts;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  for (int r = 1; r < world.world_size(); ++r) {
    const std::string part = rank_trace_path(path, r);
    while (!fs::exists(part) && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!fs::exists(part)) {
      log_warn("trace of rank ", r, " (", part, ") did not appear; ", path, " goes without it");
      continue;
    }
    parts.push_back(part);
  }
  merge_trace_files(path, parts);
  for (const std::string& part : parts) fs::remove(part);
}

// Every output path of a run, checked before any work (util/file.h's rule: a regular
// file, a new name in a writable directory, or a symlink to one; a device or FIFO named
// as logging.trace would otherwise be replaced by a file, or block the run). A fresh run
// never shares its directory with an earlier run's checkpoints: pruning would delete the
// new run's, and --resume would continue the old run and overwrite final/ with its model.
void check_output_paths(const TrainConfig& config, const RunOptions& options) {
  const fs::path out(options.out_dir);
  check_input(!fs::exists(out) || fs::is_directory(out), "exists and is not a directory",
              options.out_dir, "--out names the run directory");
  if (!options.resume && fs::exists(out / "checkpoints") && !fs::is_empty(out / "checkpoints")) {
    throw Error("holds the checkpoints of an earlier run", options.out_dir,
                "continue it with --resume " + options.out_dir +
                    ", or start this run in a new directory (or delete " +
                    (out / "checkpoints").string() + ")");
  }
  if (!config.logging.trace.empty()) {
    // The trace's directory is made, as the run directory is (after it: a refused trace
    // leaves no empty run directory).
    const fs::path trace(config.logging.trace);
    std::error_code ignored;  // a directory that cannot be made is named by the check
    if (trace.has_parent_path()) fs::create_directories(trace.parent_path(), ignored);
    check_output_file(config.logging.trace, "logging.trace");
  }
  check_output_directory(options.out_dir, "--out");
  for (const char* file : {"metrics.jsonl", "config.json", "summary.json"}) {
    check_output_file((out / file).string(), std::string("--out's ") + file);
  }
  if (config.logging.tensorboard)
    check_output_directory((out / "tensorboard").string(), "logging.tensorboard");
}

// The placements the RL loop drives. aspen::Error naming the field otherwise.
void check_multi_rank_placement(const TrainConfig& config, int world_size) {
  const Placement& p = config.placement;
  if (world_size == 1) {
    check_input(p.world_size() == 1,
                "needs " + std::to_string(p.world_size()) + " ranks; this process is alone",
                "placement",
                "start it with aspen launch --nproc-per-node " + std::to_string(p.world_size()) +
                    " -- aspen train ...");
    return;
  }
  const std::string hint =
      "colocated: placement.train.dp x train.tp = rollout.instances x rollout.tp = WORLD_SIZE; "
      "disaggregated: their sum = WORLD_SIZE";
  check_input(p.world_size() == world_size,
              "needs " + std::to_string(p.world_size()) + " ranks (" + name_of(p.mode) +
                  "), WORLD_SIZE is " + std::to_string(world_size),
              "placement.train.dp", hint);
}

// The training grid's groups (TP fastest, then the pipeline stages: a data-parallel
// replica is the train.tp x train.pp consecutive ranks [d x r, (d + 1) x r), in both
// modes): the TP group of ranks sharing a replica and a stage, the pipeline group of
// ranks sharing a replica and a TP index (stage s its rank s), the DP group of ranks at
// the same place in their replicas. Collective over `world`; a rollout-only rank
// (disaggregated) gets none.
struct TrainGroups {
  std::optional<ProcessGroupHandle> data_parallel;  // none when train.dp = 1
  TensorParallel tensor_parallel;                   // disabled when train.tp = 1
  ExpertParallel expert_parallel;                   // disabled when train.ep = 1
  // The ranks holding the same experts (train.dp / train.ep of them; none when 1).
  std::optional<ProcessGroupHandle> expert_data_parallel;
  PipelineStages pipeline;  // disabled when train.pp = 1
};

// Expert parallelism inside the data-parallel trainers (parallel/placement.h): EP
// groups of train.ep consecutive data-parallel replicas, and the expert-data-parallel
// groups of the ranks at the same place in theirs. Under PP (a replica is train.pp
// ranks) the groups are per stage: the same stage of those replicas, which hold the
// same layers. Collective over `world`.
void add_expert_groups(ProcessGroupHandle& world, const Placement& p, TrainGroups& groups) {
  if (p.train_ep == 1 || p.train_tp > 1) return;  // EP over the TP group: made with it
  const int ep_groups = p.train_dp / p.train_ep;
  const int replica = p.train_replica_size();  // train.pp: train.tp is 1 here
  for (int s = 0; s < replica; ++s) {
    for (int g = 0; g < ep_groups; ++g) {
      std::vector<int> ranks;
      for (int e = 0; e < p.train_ep; ++e) ranks.push_back((g * p.train_ep + e) * replica + s);
      if (auto group = world.new_subgroup(ranks)) {
        groups.expert_parallel = ExpertParallel::over(*group);
      }
    }
    for (int e = 0; e < p.train_ep && ep_groups > 1; ++e) {
      std::vector<int> ranks;
      for (int g = 0; g < ep_groups; ++g) ranks.push_back((g * p.train_ep + e) * replica + s);
      if (auto group = world.new_subgroup(ranks)) groups.expert_data_parallel = group;
    }
  }
}

TrainGroups make_train_groups(ProcessGroupHandle& world, const Placement& p) {
  TrainGroups groups;
  const bool every_rank_trains = p.mode == PlacementMode::kColocated;
  const int replica = p.train_replica_size();
  if (replica == 1 && every_rank_trains) {
    groups.data_parallel = world;
    add_expert_groups(world, p, groups);
    return groups;
  }
  for (int d = 0; d < p.train_dp && p.train_tp > 1; ++d) {
    for (int s = 0; s < p.train_pp; ++s) {
      std::vector<int> ranks;
      for (int t = 0; t < p.train_tp; ++t) ranks.push_back(d * replica + s * p.train_tp + t);
      if (auto group = world.new_subgroup(ranks)) {
        groups.tensor_parallel = TensorParallel::over(*group);
        // train.ep = train.tp: the experts split over the TP group, whose ranks hold the
        // same tokens (model/qwen_moe_block.h); the DP group of a TP index holds the same
        // experts, so the plain data-parallel reduction is the expert one too.
        if (p.train_ep > 1) groups.expert_parallel = ExpertParallel::over(*group, true);
      }
    }
  }
  for (int d = 0; d < p.train_dp && p.train_pp > 1; ++d) {
    for (int t = 0; t < p.train_tp; ++t) {
      std::vector<int> ranks;
      for (int s = 0; s < p.train_pp; ++s) ranks.push_back(d * replica + s * p.train_tp + t);
      // Collective over the pipeline group only (it forms the tied-embedding pair).
      if (auto group = world.new_subgroup(ranks)) groups.pipeline = PipelineStages::over(*group);
    }
  }
  if (p.train_dp > 1) {
    for (int k = 0; k < replica; ++k) {
      std::vector<int> ranks;
      for (int d = 0; d < p.train_dp; ++d) ranks.push_back(d * replica + k);
      if (auto group = world.new_subgroup(ranks)) groups.data_parallel = group;
    }
  }
  add_expert_groups(world, p, groups);
  return groups;
}

// Every rank gets rank 0's policy weights (after an SFT warm-up that each rank ran).
void broadcast_policy(ProcessGroupHandle& world, QwenForCausalLM& model) {
  torch::NoGradGuard no_grad;
  for (auto& item : model->named_parameters(/*recurse=*/true)) {
    torch::Tensor data = item.value().detach();
    world.broadcast(data, 0);
  }
}

// Greedy accuracy (and, in a multi-turn run, tool calls per trajectory) of `examples`.
struct GreedyEval {
  double accuracy = 0.0;
  double tool_calls_mean = 0.0;
};
GreedyEval greedy_eval(RlSetup& setup, const TrajectoryEnvironments* trajectories,
                       const std::vector<TaskExample>& examples, int64_t max_tokens) {
  if (trajectories == nullptr) return {greedy_accuracy(setup, examples, max_tokens), 0.0};
  if (examples.empty()) return {};
  SamplingParams greedy;
  greedy.temperature = 0.0;
  greedy.max_tokens = max_tokens;
  const TrajectoryEvalResult result = evaluate_trajectories(
      setup, *trajectories, examples, greedy, /*n=*/1, /*kv_cache_bytes=*/int64_t{64} << 20);
  return {result.pass.pass_at.at(1), result.tool_calls_mean};
}

// Greedy evaluation over all ranks: rank r evaluates examples r, r + d, ...
GreedyEval run_accuracy(std::optional<ProcessGroupHandle>& world, RlSetup& setup,
                        int64_t max_tokens, const TrajectoryEnvironments* trajectories) {
  if (!world) return greedy_eval(setup, trajectories, setup.eval_examples, max_tokens);
  std::vector<TaskExample> mine;
  for (size_t i = static_cast<size_t>(world->rank()); i < setup.eval_examples.size();
       i += static_cast<size_t>(world->world_size())) {
    mine.push_back(setup.eval_examples[i]);
  }
  const GreedyEval local = greedy_eval(setup, trajectories, mine, max_tokens);
  const auto size = static_cast<double>(mine.size());
  torch::Tensor counts =
      torch::tensor({local.accuracy * size, local.tool_calls_mean * size, size}, torch::kFloat64);
  world->all_reduce_sum(counts);
  const double total = counts[2].item<double>();
  if (total <= 0) return {};
  return {counts[0].item<double>() / total, counts[1].item<double>() / total};
}

// Records an evaluation under `key` ("initial", "before", "after") of `evals`.
double record_eval(nlohmann::json& evals, const std::string& key, const GreedyEval& eval,
                   bool multi_turn) {
  evals[key] = eval.accuracy;
  if (multi_turn) evals["tool_calls_" + key] = eval.tool_calls_mean;
  return eval.accuracy;
}

// What the driver does after RL iteration `i` (0-based). From the config and the index
// alone, so every rank agrees: the full policy's gather for these readers is collective
// over the trainers (IterationEngine::ensure_full_policy).
struct AfterIteration {
  bool evaluates = false;    // greedy evaluation: every logging.eval_every, and the last
  bool checkpoints = false;  // checkpoint.every
  bool last = false;         // final/ is exported after it
  // Each of them reads setup.model: evaluation's engines, a checkpoint's policy/ (one
  // whole HF directory, which loads at any layout), final/.
  bool reads_full_policy() const { return evaluates || checkpoints || last; }
};

AfterIteration after_iteration(const TrainConfig& config, int64_t i) {
  AfterIteration after;
  after.last = i + 1 == config.train.iterations;
  after.evaluates =
      after.last || (config.logging.eval_every > 0 && (i + 1) % config.logging.eval_every == 0);
  after.checkpoints = config.checkpoint.every > 0 && (i + 1) % config.checkpoint.every == 0;
  return after;
}

}  // namespace

nlohmann::json run_rl(const TrainConfig& config, RlSetup& setup, const RunOptions& options) {
  // One process runs every role, or (started by aspen launch with WORLD_SIZE > 1) each
  // rank is one rollout instance and one data-parallel training rank.
  const int world_size = dist_env_present() ? read_dist_env().world_size : 1;
  check_multi_rank_placement(config, world_size);
  check_trainer_pipeline(config, setup.model->config.num_hidden_layers);
  std::optional<ProcessGroupHandle> world;
  if (world_size > 1) world = init_process_group(read_dist_env());
  const bool writer = !world || world->rank() == 0;  // rank 0 owns the run directory
  if (writer) check_output_paths(config, options);
  if (config.pipeline.threads > 0) at::set_num_threads(config.pipeline.threads);
  const fs::path out(options.out_dir);
  const std::string metrics_path = (out / "metrics.jsonl").string();
  const auto start = Clock::now();
  const int64_t max_tokens = config.rollout.max_tokens;

  std::optional<LoadedCheckpoint> checkpoint;
  nlohmann::json evals;  // accuracy_initial, before, after
  // Multi-turn runs evaluate whole trajectories with the run's environments.
  const std::shared_ptr<const TrajectoryEnvironments> trajectories =
      make_trajectory_environments(config, setup);
  const bool multi_turn = trajectories != nullptr;
  if (options.resume) {
    // Every rank reads the same checkpoint (the run directory is on a shared disk).
    const auto latest = latest_checkpoint(options.out_dir);
    check_input(latest.has_value(), "no checkpoint to resume from", options.out_dir,
                "checkpoints are written every checkpoint.every iterations");
    attach_policy_lora(config, setup);  // the checkpoint holds base and adapters
    checkpoint = load_checkpoint(*latest, setup);
    // Before anything is rewritten: a state that contradicts the run is refused.
    check_checkpoint_against_run(checkpoint->iteration, checkpoint->schedule_state,
                                 (fs::path(checkpoint->dir) / "state.json").string(), config,
                                 static_cast<int64_t>(setup.train_examples.size()), metrics_path);
    evals = checkpoint->schedule_state.at("evals");
    if (world) world->barrier();  // all have read it before rank 0 rewrites the metrics
    if (writer) cut_metrics(metrics_path, checkpoint->iteration);
  } else if (writer) {
    fs::create_directories(out);
    write_file_atomic((out / "config.json").string(), config.as_json().dump(2));
    std::ofstream(metrics_path, std::ios::trunc);
  }
  // Ranks other than 0 write no files: their stream goes nowhere.
  std::ofstream metrics;
  if (writer) metrics.open(metrics_path, std::ios::app);
  // logging.tensorboard: the eval and RL metrics lines again as TensorBoard scalars,
  // step = iteration. A fresh run starts the directory empty, as it does metrics.jsonl;
  // a resumed run adds a file that supersedes the old files' steps after the checkpoint
  // (the lines cut_metrics removed).
  std::optional<TensorBoardWriter> tensorboard;
  const std::string tensorboard_dir = (out / "tensorboard").string();
  if (writer && config.logging.tensorboard) {
    if (!checkpoint) remove_event_files(tensorboard_dir);
    tensorboard.emplace(tensorboard_dir, checkpoint ? checkpoint->iteration + 1 : 0);
    tensorboard->flush();
  }

  if (!checkpoint) {
    record_eval(evals, "initial", run_accuracy(world, setup, max_tokens, trajectories.get()),
                multi_turn);
    TrainConfig sft_config = config;
    sft_config.logging.console = config.logging.console && writer;  // rank 0 reports
    run_sft_phase(sft_config, setup, metrics);
    if (world) broadcast_policy(*world, setup.model);
    attach_policy_lora(config, setup);  // RL trains adapters on the warmed-up base
    record_eval(evals, "before", run_accuracy(world, setup, max_tokens, trajectories.get()),
                multi_turn);
    record_eval(evals, "after", {evals["before"].get<double>(), evals.value("tool_calls_before", 0.0)},
                multi_turn);
    if (writer) {
      const nlohmann::json line = {
          {"phase", "eval"}, {"iteration", 0}, {"eval_accuracy", evals["before"]}};
      check_finite_metrics(line, "metrics.jsonl: the eval before RL");
      write_jsonl(metrics, line);
      if (tensorboard) tensorboard->add(0, numeric_fields(line));
    }
  }
  if (config.logging.console && writer) {
    std::cout << "eval greedy accuracy before RL: " << evals["before"].get<double>()
              << " (untrained: " << evals["initial"].get<double>() << ")\n";
    if (checkpoint) std::cout << "resuming after iteration " << checkpoint->iteration << "\n";
    std::cout << std::flush;
  }

  TrainGroups groups;
  if (world) {
    groups = make_train_groups(*world, config.placement);
    validate_tp_size(setup.model->config, config.placement.train_tp);
    validate_tp_size(setup.model->config, config.placement.rollout_tp);
    check_input(config.placement.rollout_ep == 1 || setup.model->config.is_moe(),
                "needs a mixture-of-experts model", "placement.rollout.ep",
                "use placement.rollout.ep=1 for a dense model");
  }
  RlWorkers workers(config, setup, checkpoint ? &checkpoint->workers : nullptr,
                    groups.data_parallel, groups.tensor_parallel, groups.expert_parallel,
                    groups.expert_data_parallel, groups.pipeline);
  if (checkpoint) restore_optimizers(*checkpoint, workers);
  // Rank r > 0 writes its own timeline next to rank 0's (PATH.rank-r).
  const int rank = world ? world->rank() : 0;
  const std::string trace_path = config.logging.trace.empty() || writer
                                     ? config.logging.trace
                                     : rank_trace_path(config.logging.trace, rank);
  if (!trace_path.empty() && !writer) fs::remove(trace_path);  // rank 0 waits for a new one
  TraceWriter trace(trace_path, rank + 1, "rank " + std::to_string(rank));
  EngineContext context{config, setup, workers};
  if (!config.logging.trace.empty()) context.trace = &trace;
  // The trainers gather the full policy only in the iterations whose readers need it.
  context.reads_full_policy_after = [&config](int64_t i) {
    return after_iteration(config, i).reads_full_policy();
  };
  // Every mode and layout is the one engine (sync: eta = 0).
  auto schedule = std::make_unique<IterationEngine>(context, world);
  const int64_t first = checkpoint ? checkpoint->iteration : 0;
  if (checkpoint) schedule->restore(checkpoint->schedule_state.at("schedule"));
  const int64_t tokens_before = schedule->trained_tokens();  // trained before a resume
  double rl_seconds = 0.0;  // this process's RL iterations, SFT and evaluation excluded
  if (schedule->serves_only()) {
    // A rollout-only rank (disaggregated asynchronous): it generates until the
    // trainers end the run, and writes nothing.
    schedule->serve();
    schedule->stop();
    trace.flush();
    return {{"ranks", world->world_size()}, {"serves_only", true}};
  }
  // Evaluation and the final barrier span the ranks that leave together: every rank,
  // or the asynchronous engine's trainers (a rollout rank may have failed and left).
  std::optional<ProcessGroupHandle> eval_ranks =
      schedule->evaluates_on_trainers() ? schedule->trainer_group() : world;

  ConsoleProgress progress(std::cout, stdout_is_terminal(), config.train.iterations, first);
  for (int64_t i = first; i < config.train.iterations; ++i) {
    nlohmann::json line = schedule->iteration(i);
    line["phase"] = "rl";
    rl_seconds += line["seconds"].get<double>();
    const AfterIteration after = after_iteration(config, i);
    // The readers below take the full policy the iteration gathered for them; each
    // ensure_full_policy() only guards (every trainer calls it: collective if it gathers).
    if (after.evaluates) {
      schedule->ensure_full_policy();
      record_eval(evals, "after", run_accuracy(eval_ranks, setup, max_tokens, trajectories.get()),
                  multi_turn);
      line["eval_accuracy"] = evals["after"];
      if (multi_turn) line["eval_tool_calls_mean"] = evals["tool_calls_after"];
    }
    if (writer) {
      check_finite_metrics(line, "metrics.jsonl: iteration " + std::to_string(i + 1));
      write_jsonl(metrics, line);
      metrics.flush();
      if (tensorboard) {
        tensorboard->add(i + 1, numeric_fields(line));
        tensorboard->flush();  // a live TensorBoard sees each iteration
      }
      if (config.logging.console) progress.report(i + 1, line);
    }
    // Rank 0 writes the checkpoint (after the metrics line, which a resume keeps); under
    // tensor parallelism the rest of the first TP group writes its shards with it, under
    // expert parallelism alone the rest of the first EP group its experts' optimizer
    // state, under pipeline parallelism the other stages of the first replica their
    // stages' (all three groups are ranks [0, size): TP is the fastest index, then EP
    // or the stages); under PP x EP the stages of the first EP group's train.ep
    // replicas (ranks [0, ep * pp)).
    const bool ep_in_dp = groups.expert_parallel.enabled() && !groups.tensor_parallel.enabled();
    const bool checkpoints =
        writer || (groups.tensor_parallel.enabled() && rank < config.placement.train_tp) ||
        (groups.expert_parallel.enabled() && rank < config.placement.train_ep) ||
        (groups.pipeline.enabled() &&
         rank < config.placement.train_replica_size() * (ep_in_dp ? config.placement.train_ep : 1));
    if (after.checkpoints) schedule->ensure_full_policy();  // policy/ is setup.model
    if (checkpoints && after.checkpoints) {
      save_checkpoint(options.out_dir, i + 1, setup, workers,
                      writer ? nlohmann::json{{"schedule", schedule->state()}, {"evals", evals}}
                             : nlohmann::json(),
                      config.checkpoint.keep_last, groups.expert_parallel);
    }
  }
  progress.finish();
  schedule->ensure_full_policy();  // final/ is setup.model (no-op: the last iteration's)
  schedule->stop();
  trace.flush();

  const std::string final_dir = (out / "final").string();
  // Rank 0's last checkpoint is written before anyone leaves.
  if (eval_ranks) eval_ranks->barrier();
  if (writer) {
    if (setup.model->has_lora()) {
      export_lora_policy(config, setup, final_dir);
    } else {
      export_policy(setup, final_dir);
    }
  }
  if (writer && world && !config.logging.trace.empty())
    merge_rank_traces(config.logging.trace, *world);
  const double wall = seconds_since(start);
  nlohmann::json summary = {
      {"eval_accuracy_before_rl", evals["before"]},
      {"eval_accuracy_after_rl", evals["after"]},
      {"eval_accuracy_untrained", evals["initial"]},

      {"schedule", name_of(config.pipeline.mode)},
      {"iterations", config.train.iterations},
      {"resumed_from_iteration", first},
      {"samples", schedule->samples()},
      {"trained_tokens", schedule->trained_tokens()},
      {"wall_seconds", wall},
      {"rl_seconds", rl_seconds},
      // Trained response tokens per second of RL iterations (this process's; the SFT
      // warm-up and evaluations are not training throughput).
      {"tokens_per_second", static_cast<double>(schedule->trained_tokens() - tokens_before) /
                                std::max(rl_seconds, 1e-9)},
      {"final_model", final_dir},
      {"metrics", metrics_path}};
  if (!config.logging.trace.empty()) summary["trace"] = config.logging.trace;
  if (config.logging.tensorboard) summary["tensorboard"] = tensorboard_dir;
  if (world) summary["ranks"] = world->world_size();
  if (multi_turn) {
    // Greedy trajectories: tool calls per trajectory before and after RL.
    summary["eval_tool_calls_before_rl"] = evals.value("tool_calls_before", 0.0);
    summary["eval_tool_calls_after_rl"] = evals.value("tool_calls_after", 0.0);
  }
  if (writer) {
    check_finite_metrics(summary, "summary.json");
    write_file_atomic((out / "summary.json").string(), summary.dump(2));
  }
  return summary;
}

std::vector<nlohmann::json> read_rl_metrics(const std::string& run_dir) {
  const std::string path = (fs::path(run_dir) / "metrics.jsonl").string();
  std::vector<nlohmann::json> lines;
  std::ifstream in(path);
  int64_t number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    nlohmann::json json = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    check_input(!json.is_discarded(), "line " + std::to_string(number) + " is not JSON", path);
    if (json.value("phase", "") == "rl") lines.push_back(std::move(json));
  }
  return lines;
}

}  // namespace aspen::pipeline
