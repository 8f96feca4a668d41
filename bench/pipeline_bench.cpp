#include "bench/pipeline_bench.h"

#include <filesystem>
#include <fstream>
#include <algorithm>
#include <map>

#include "aspen/parallel/launcher.h"
#include "aspen/pipeline/rl_run.h"
#include "aspen/pipeline/rl_setup.h"
#include "aspen/pipeline/sft_phase.h"
#include "aspen/sim/simulation_spec.h"
#include "aspen/util/error.h"
#include "aspen/util/config.h"
#include "bench/imports.h"
#include "bench/tool_latency_workload.h"

namespace aspen::bench {
namespace {

namespace fs = std::filesystem;

// The default workload; any of it can be overridden from the command line.
// rollout.max_num_seqs=16 and pipeline.max_staleness=3 are the measured choice for this
// model on a 2-core CPU (docs/benchmarks.md, "Deadline order"): the engine's queue is in
// admission order, so a decode batch of 16 serves the oldest groups first - the ones the
// next update must wait for - instead of advancing every long-tail group of the window
// together (32-96 long sequences at 4-17 ms a step, all due at once). Sync is the same
// with the cap (its wall time, tokens and rewards did not move); eta 3 gives each group
// one more update to finish in.
const std::vector<std::string> kDefaultWorkload = {"train.sft_steps=400",
                                                   "train.iterations=16",
                                                   "train.compute_dtype=bf16",
                                                   "train.lr=1e-5",
                                                   "rollout.prompts_per_iteration=16",
                                                   "rollout.n=8",
                                                   "rollout.max_tokens=384",
                                                   "rollout.long_tail_fraction=0.04",
                                                   "rollout.max_num_seqs=16",
                                                   "data.eval_size=50",
                                                   "logging.console=false",
                                                   "logging.eval_every=0",
                                                   "pipeline.instances=1",
                                                   "pipeline.max_staleness=3",
                                                   "pipeline.rollout_cores=[0]",
                                                   "pipeline.trainer_cores=[1]"};

nlohmann::json side_summary(const std::vector<nlohmann::json>& lines) {
  double wall = 0.0, tokens = 0.0, rows = 0.0, switched_tokens = 0.0;
  int64_t versions_per_row_max = 0;
  std::vector<double> rewards;
  std::map<std::string, double> bubbles;
  // Multi-turn runs: per-iteration means, averaged over iterations.
  std::map<std::string, double> trajectories;
  int64_t trajectory_lines = 0;
  nlohmann::json staleness = nlohmann::json::object();
  // What aspen simulate calibrates on (sim/simulation_spec.h): each iteration's costs.
  nlohmann::json iterations = nlohmann::json::array();
  for (const auto& line : lines) {
    nlohmann::json costs = {{"seconds", line["seconds"]},
                            {"trained_tokens", line["trained_tokens"]},
                            {"trained_rows", line["trained_rows"]},
                            {"stage_seconds", line["stage_seconds"]}};
    if (line.contains("rollout_work")) costs["rollout_work"] = line["rollout_work"];
    iterations.push_back(costs);
    const double seconds = line["seconds"].get<double>();
    wall += seconds;
    tokens += line["trained_tokens"].get<double>();
    rows += line["trained_rows"].get<double>();
    switched_tokens += line.value("rollout_switched_token_fraction", 0.0) *
                       line["trained_tokens"].get<double>();
    versions_per_row_max =
        std::max(versions_per_row_max, line.value("rollout_versions_per_row_max", int64_t{0}));
    rewards.push_back(line["reward_mean"].get<double>());
    for (const auto& [key, value] : line["bubbles"].items()) {
      if (value.is_number()) bubbles[key] += value.get<double>() * seconds;
    }
    if (line.contains("turns_mean")) {
      ++trajectory_lines;
      for (const char* key : {"turns_mean", "tool_calls_mean", "tool_wait_s_mean"}) {
        trajectories[key] += line.value(key, 0.0);
      }
    }
    for (const auto& [behind, count] : line["bubbles"]["staleness_histogram"].items()) {
      staleness[behind] = staleness.value(behind, int64_t{0}) + count.get<int64_t>();
    }
  }
  nlohmann::json bubble_json = nlohmann::json::object();
  for (const auto& [key, weighted] : bubbles) bubble_json[key] = weighted / std::max(wall, 1e-9);
  bubble_json["staleness_histogram"] = staleness;
  const nlohmann::json last = lines.empty() ? nlohmann::json::object() : lines.back();
  const size_t quarter = std::max<size_t>(1, rewards.size() / 4);
  double final_reward = 0.0;
  for (size_t i = rewards.size() - quarter; i < rewards.size(); ++i) final_reward += rewards[i];
  nlohmann::json summary = {{"effective_tps", tokens / std::max(wall, 1e-9)},
          {"samples_per_s", rows / std::max(wall, 1e-9)},
          {"final_reward", final_reward / static_cast<double>(quarter)},
          {"reward_curve", rewards},
          {"bubbles", bubble_json},
          {"trained_tokens", tokens},
          {"wall_seconds", wall},
          {"iterations", iterations},
          // In-flight updates and partial rollouts (pipeline/token_versions.h,
          // rollout_worker.h): how mixed the trained rows' versions were, and the
          // samples cut and resumed (cumulative counts, hence the last line's).
          {"versions", {{"rollout_versions_per_row_max", versions_per_row_max},
                        {"rollout_switched_token_fraction", switched_tokens / std::max(tokens, 1.0)},
                        {"partial_cut_samples", last.value("partial_cut_samples", int64_t{0})},
                        {"partial_cut_tokens", last.value("partial_cut_tokens", int64_t{0})},
                        {"partial_resumed_samples",
                         last.value("partial_resumed_samples", int64_t{0})}}}};
  if (trajectory_lines > 0) {
    for (const auto& [key, sum] : trajectories) {
      summary["trajectories"][key] = sum / static_cast<double>(trajectory_lines);
    }
  }
  return summary;
}

}  // namespace

nlohmann::json run_pipeline_bench(const PipelineBenchOptions& options) {
  std::vector<std::string> arguments = options.arguments;
  bool has_file = false;
  for (const auto& a : arguments) has_file |= a.find('=') == std::string::npos;
  if (!has_file)
    arguments.insert(arguments.begin(), kDefaultWorkload.begin(), kDefaultWorkload.end());
  ToolLatencyWorkload tools;
  const bool with_tools = !options.tool_latency.empty();
  if (with_tools) {
    parse_tool_latency(options.tool_latency, tools);
    tools.turns = options.tool_turns;
    tools.observation_tokens = options.observation_tokens;
    // Sized on the config without them; inserted before the user's overrides, which win.
    Config plain = Config::from_arguments(arguments);
    const TrainConfig single_turn = parse_train_config(plain);
    const std::vector<std::string> extra =
        tool_latency_arguments(tools, single_turn, tools.median_ms);
    size_t at = has_file ? 0 : kDefaultWorkload.size();
    if (has_file) {
      while (at < arguments.size() && arguments[at].find('=') != std::string::npos) ++at;
      ++at;  // after the file
    }
    arguments.insert(arguments.begin() + static_cast<std::ptrdiff_t>(at), extra.begin(),
                     extra.end());
  }
  auto parse = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> all = arguments;
    all.insert(all.end(), extra.begin(), extra.end());
    Config config = Config::from_arguments(all);
    return parse_train_config(config);
  };

  // One SFT warm-up shared by every side, so all start from the same weights.
  const TrainConfig base = parse({});
  RlSetup setup = build_rl_setup(base);
  {
    std::ofstream discard;
    run_sft_phase(base, setup, discard);
  }
  std::map<std::string, torch::Tensor> warm;
  for (const auto& [name, tensor] : setup.model->hf_state()) warm[name] = tensor.detach().clone();

  const fs::path root = fs::temp_directory_path() / "aspen_bench_pipeline";
  fs::remove_all(root);
  const bool across = options.nproc > 1;
  std::vector<std::string> placement;
  if (across) {
    check_input(!options.self_exe.empty(), "needs the aspen executable", "bench pipeline --nproc");
    // The ranks start from the warm-up weights as an HF directory.
    setup.model->load_state(warm, "bench warm-up weights");
    export_policy(setup, (root / "warm").string());
    bool placed = false;
    for (const auto& a : arguments) placed |= a.rfind("placement.", 0) == 0;
    if (!placed) {
      placement = {"placement.mode=disaggregated", "placement.train.dp=1",
                   "placement.rollout.instances=" + std::to_string(options.nproc - 1)};
    }
  }
  auto run_side = [&](const std::string& name, const std::vector<std::string>& extra) {
    std::vector<std::string> all = extra;
    all.push_back("train.sft_steps=0");
    const std::string dir = (root / name).string();
    if (!across) {
      const TrainConfig config = parse(all);
      setup.model->load_state(warm, "bench warm-up weights");
      run_rl(config, setup, RunOptions{dir});
      return side_summary(read_rl_metrics(dir));
    }
    all.push_back("model.path=" + (root / "warm").string());
    all.insert(all.end(), placement.begin(), placement.end());
    const TrainConfig config = parse(all);  // checked here, before any process starts
    LaunchOptions launch_options;
    launch_options.nproc_per_node = options.nproc;
    launch_options.master_port = 0;
    if (config.pipeline.mode == PipelineMode::kAsync) {
      for (int r = config.placement.train_dp * config.placement.train_tp; r < options.nproc; ++r) {
        launch_options.tolerate_exit.push_back(r);
      }
    }
    // The ranks' reports stay out of this command's JSON.
    launch_options.stdout_path = (root / (name + ".log")).string();
    launch_options.command = {options.self_exe, "train", "--out", dir};
    for (const auto& a : arguments) launch_options.command.push_back(a);
    for (const auto& a : all) launch_options.command.push_back(a);
    const int status = launch(launch_options);
    check_input(status == 0, "its processes exited with status " + std::to_string(status),
                "bench pipeline side " + name);
    nlohmann::json summary = side_summary(read_rl_metrics(dir));
    summary["processes"] = options.nproc;
    return summary;
  };

  nlohmann::json result;
  // The baseline runs every stage on one thread (measured fastest for it: see
  // pipeline.threads in docs/config.md); async gives rollout and trainer a core each.
  // The sync side is the baseline whatever the overrides ask of async: no over-sampling.
  result["sync"] = run_side("sync", {"pipeline.mode=sync", "pipeline.over_sample=0"});
  result["async"] = run_side("async", {"pipeline.mode=async"});
  result["ratio"] = result["async"]["effective_tps"].get<double>() /
                    std::max(result["sync"]["effective_tps"].get<double>(), 1e-9);
  if (with_tools) {
    // The same trajectories with tool calls that answer at once: the gain without tools.
    const std::vector<std::string> instant = {"rollout.environment.tool_latency_ms=0",
                                              "simulate.tool_latency_ms=0"};
    auto with = [&](std::vector<std::string> side) {
      side.insert(side.end(), instant.begin(), instant.end());
      return side;
    };
    nlohmann::json& t = result["tool_latency"];
    t["distribution"] = options.tool_latency;
    t["turns"] = tools.turns;
    t["observation_tokens"] = tools.observation_tokens;
    t["no_latency"]["sync"] =
        run_side("sync_no_latency", with({"pipeline.mode=sync", "pipeline.over_sample=0"}));
    t["no_latency"]["async"] = run_side("async_no_latency", with({"pipeline.mode=async"}));
    t["no_latency"]["ratio"] = t["no_latency"]["async"]["effective_tps"].get<double>() /
                               std::max(t["no_latency"]["sync"]["effective_tps"].get<double>(), 1e-9);
    t["gain_over_no_latency"] =
        result["ratio"].get<double>() / std::max(t["no_latency"]["ratio"].get<double>(), 1e-9);
  }
  if (options.compare_dispatch) {
    for (const std::string policy : {"round_robin", "least_requests", "queue_aware"}) {
      result["dispatch"][policy] = run_side(
          "async_" + policy, {"pipeline.mode=async", "pipeline.instances=2",
                              "pipeline.rollout_cores=[0]", "pipeline.dispatch=" + policy});
      // Across processes the instance count is the placement's (nproc - 1).
    }
  }
  result["workload"] = parse(placement).as_json();
  result["processes"] = std::max(1, options.nproc);
  // The simulator's prediction of both sides from the sync side's recorded step costs.
  result["simulated"] = simulate_bench_pipeline(result);
  fs::remove_all(root);
  return result;
}

}  // namespace aspen::bench
