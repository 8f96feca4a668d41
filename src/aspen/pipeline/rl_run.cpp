#include "aspen/pipeline/rl_run.h"

#include <ATen/Parallel.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "aspen/io/jsonl.h"
#include "aspen/parallel/dist_env.h"
#include "aspen/pipeline/checkpoint.h"
#include "aspen/pipeline/schedule.h"
#include "aspen/pipeline/sft_phase.h"
#include "aspen/pipeline/sync_schedule.h"
#include "aspen/pipeline/trace_writer.h"
#include "aspen/util/error.h"
#include "aspen/util/file.h"

namespace aspen {
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

void print_progress(int64_t iteration, const nlohmann::json& line) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(3) << "iter " << std::setw(3) << iteration << "  reward "
      << line["reward_mean"].get<double>() << "  acc " << line["accuracy"].get<double>()
      << "  len " << std::setprecision(1) << line["response_length_mean"].get<double>()
      << std::setprecision(3) << "  kl " << line["approx_kl"].get<double>() << "  clip "
      << line["clip_frac"].get<double>() << "  " << std::setprecision(1)
      << line["seconds"].get<double>() << "s";
  if (line.contains("eval_accuracy")) {
    out << "  eval_acc " << std::setprecision(3) << line["eval_accuracy"].get<double>();
  }
  std::cout << out.str() << "\n" << std::flush;
}

}  // namespace

nlohmann::json run_rl(const TrainConfig& config, RlSetup& setup, const RunOptions& options) {
  // One process runs every role. The multi-rank pieces exist (parallel/: DP trainer,
  // TP model, resharder, sharded checkpoints) but the RL loop does not yet drive
  // them across ranks, so a multi-rank placement or launch is refused, not ignored.
  const int world = dist_env_present() ? read_dist_env().world_size : 1;
  check_input(config.placement.world_size() == 1 && world == 1,
              "aspen train runs its roles in one process; placement needs " +
                  std::to_string(config.placement.world_size()) + " rank(s) and WORLD_SIZE is " +
                  std::to_string(world),
              "placement",
              "use the default placement (train.dp = train.tp = rollout.instances = "
              "rollout.tp = 1) without aspen launch");
  if (config.pipeline.threads > 0) at::set_num_threads(config.pipeline.threads);
  const fs::path out(options.out_dir);
  const std::string metrics_path = (out / "metrics.jsonl").string();
  const auto start = Clock::now();
  const int64_t max_tokens = config.rollout.max_tokens;

  std::optional<LoadedCheckpoint> checkpoint;
  nlohmann::json evals;  // accuracy_initial, before, after
  if (options.resume) {
    const auto latest = latest_checkpoint(options.out_dir);
    check_input(latest.has_value(), "no checkpoint to resume from", options.out_dir,
                "checkpoints are written every checkpoint.every iterations");
    checkpoint = load_checkpoint(*latest, setup);
    evals = checkpoint->schedule_state.at("evals");
    cut_metrics(metrics_path, checkpoint->iteration);
  } else {
    fs::create_directories(out);
    write_file_atomic((out / "config.json").string(), config.as_json().dump(2));
    std::ofstream(metrics_path, std::ios::trunc);
  }
  std::ofstream metrics(metrics_path, std::ios::app);

  if (!checkpoint) {
    evals["initial"] = greedy_accuracy(setup, setup.eval_examples, max_tokens);
    run_sft_phase(config, setup, metrics);
    evals["before"] = greedy_accuracy(setup, setup.eval_examples, max_tokens);
    evals["after"] = evals["before"];
    write_jsonl(metrics, {{"phase", "eval"}, {"iteration", 0}, {"eval_accuracy", evals["before"]}});
  }
  if (config.logging.console) {
    std::cout << "eval greedy accuracy before RL: " << evals["before"].get<double>()
              << " (untrained: " << evals["initial"].get<double>() << ")\n";
    if (checkpoint) std::cout << "resuming after iteration " << checkpoint->iteration << "\n";
    std::cout << std::flush;
  }

  RlWorkers workers(config, setup, checkpoint ? &checkpoint->workers : nullptr);
  if (checkpoint) restore_optimizers(*checkpoint, workers);
  TraceWriter trace(config.logging.trace);
  ScheduleContext context{config, setup, workers};
  if (!config.logging.trace.empty()) context.trace = &trace;
  std::unique_ptr<Schedule> schedule = config.pipeline.mode == "async"
                                           ? make_async_schedule(context)
                                           : make_sync_schedule(context);
  const int64_t first = checkpoint ? checkpoint->iteration : 0;
  if (checkpoint) schedule->restore(checkpoint->schedule_state.at("schedule"));

  for (int64_t i = first; i < config.train.iterations; ++i) {
    nlohmann::json line = schedule->iteration(i);
    line["phase"] = "rl";
    const bool last = i + 1 == config.train.iterations;
    if (last || (config.logging.eval_every > 0 && (i + 1) % config.logging.eval_every == 0)) {
      evals["after"] = greedy_accuracy(setup, setup.eval_examples, max_tokens);
      line["eval_accuracy"] = evals["after"];
    }
    write_jsonl(metrics, line);
    metrics.flush();
    if (config.logging.console) print_progress(i + 1, line);
    if (config.checkpoint.every > 0 && (i + 1) % config.checkpoint.every == 0) {
      save_checkpoint(options.out_dir, i + 1, setup, workers,
                      {{"schedule", schedule->state()}, {"evals", evals}},
                      config.checkpoint.keep_last);
    }
  }
  schedule->stop();
  trace.flush();

  const std::string final_dir = (out / "final").string();
  export_policy(setup, final_dir);
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  nlohmann::json summary = {
      {"eval_accuracy_before_rl", evals["before"]},
      {"eval_accuracy_after_rl", evals["after"]},
      {"eval_accuracy_untrained", evals["initial"]},
      {"schedule", config.pipeline.mode},
      {"iterations", config.train.iterations},
      {"resumed_from_iteration", first},
      {"samples", schedule->samples()},
      {"trained_tokens", schedule->trained_tokens()},
      {"wall_seconds", wall},
      {"tokens_per_second", static_cast<double>(schedule->trained_tokens()) / std::max(wall, 1e-9)},
      {"final_model", final_dir},
      {"metrics", metrics_path}};
  if (!config.logging.trace.empty()) summary["trace"] = config.logging.trace;
  write_file_atomic((out / "summary.json").string(), summary.dump(2));
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

}  // namespace aspen
