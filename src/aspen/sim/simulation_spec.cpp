#include "aspen/sim/simulation_spec.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <sstream>
#include <tuple>

#include "aspen/pipeline/rl_setup.h"
#include "aspen/pipeline/rollout_requests.h"
#include "aspen/pipeline/staleness_window.h"
#include "aspen/sim/imports.h"
#include "aspen/util/config.h"
#include "aspen/util/error.h"
#include "aspen/util/file.h"
#include "aspen/util/log.h"

namespace aspen::sim {
namespace {

// Bounds on what is simulated, each stated with its reason (as parse_train_config
// bounds a run's sizes): past them a typo (1e9) is an error at once rather than a
// simulation that runs for days or an int overflow.
// Devices per side: simulate.devices' own bound; no cluster has a million accelerators.
constexpr int64_t kMaxSimulatedDevices = int64_t{1} << 20;
// The simulator visits every rollout instance at each admission (as the iteration
// engine polls them), so its cost grows with instances x samples.
constexpr int64_t kMaxSimulatedInstances = 4096;
// A simulated run reaches its steady state within tens of iterations.
constexpr int64_t kMaxSimulatedIterations = 100000;
constexpr int64_t kMaxSimulatedPrompts = int64_t{1} << 20;  // per iteration
constexpr int64_t kMaxSimulatedSamples = int64_t{1} << 16;  // per prompt (rollout.n)
// Longer than any model's context (the longest are about 10M tokens).
constexpr int64_t kMaxSimulatedResponseTokens = int64_t{1} << 24;
// 100 TB: a thousand times the largest accelerator memory.
constexpr double kMaxSimulatedMemoryGb = 1e5;
// The simulation's cost, measured on the 2-core machine: per iteration of R rows on I
// instances about 1e-8 s x R x (R + 8 I) (the dock's claims grow with the rows held:
// 4,096 rows 0.1 s, 65,536 rows 45 s; each instance adds its visits). The seeds' setting
// (100 x 4,096 rows, 32 instances) is 1.8e9 units, ~20 s; the bound is ~10 minutes.
constexpr double kSimulatedSecondsPerUnit = 1e-8;
constexpr double kMaxSimulatedUnits = 6e10;

std::string general(double value) {
  std::ostringstream text;
  text << std::setprecision(3) << value;  // 1e+300, 6e+10, 31.5
  return text.str();
}

void check_simulated_size(int64_t value, int64_t bound, const std::string& key,
                          const std::string& why) {
  check_input(value <= bound,
              "is " + std::to_string(value) + ", above aspen simulate's bound " +
                  std::to_string(bound),
              key, why);
}

ModelConfig qwen25(int64_t hidden, int64_t intermediate, int64_t layers, int64_t heads,
                   int64_t kv_heads) {
  ModelConfig c;
  c.family = ModelFamily::kQwen2;
  c.vocab_size = 152064;
  c.hidden_size = hidden;
  c.intermediate_size = intermediate;
  c.num_hidden_layers = layers;
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv_heads;
  c.head_dim = hidden / heads;
  c.attention_bias = true;
  c.tie_word_embeddings = false;
  return c;
}

ModelConfig qwen3_30b_a3b() {
  ModelConfig c;
  c.family = ModelFamily::kQwen3Moe;
  c.vocab_size = 151936;
  c.hidden_size = 2048;
  c.intermediate_size = 6144;
  c.num_hidden_layers = 48;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 4;
  c.head_dim = 128;
  c.tie_word_embeddings = false;
  c.moe.num_experts = 128;
  c.moe.num_experts_per_tok = 8;
  c.moe.moe_intermediate_size = 768;
  c.moe.norm_topk_prob = true;
  return c;
}

DevicePreset simulated_device(const SimulateSection& s) {
  check_input(s.memory_gb <= kMaxSimulatedMemoryGb,
              "is " + general(s.memory_gb) + " GB, above aspen simulate's bound " +
                  general(kMaxSimulatedMemoryGb) + " GB",
              "simulate.memory_gb", "100 TB is a thousand times the largest accelerator's memory");
  DevicePreset d = device_preset(s.device);
  auto set = [](double value, double scale, double& field) {
    if (value > 0) field = value * scale;
  };
  set(s.peak_tflops, 1e12, d.peak_flops);
  set(s.memory_gb, 1e9, d.memory_bytes);
  set(s.memory_bandwidth_gbs, 1e9, d.memory_bandwidth);
  set(s.link_gbs, 1e9, d.link_bandwidth);
  set(s.network_gbs, 1e9, d.network_bandwidth);
  set(s.train_mfu, 1.0, d.train_mfu);
  set(s.prefill_mfu, 1.0, d.prefill_mfu);
  set(s.decode_efficiency, 1.0, d.decode_bandwidth_efficiency);
  if (s.devices_per_node > 0) d.devices_per_node = static_cast<int>(s.devices_per_node);
  if (s.step_overhead_ms >= 0) d.step_overhead_s = s.step_overhead_ms * 1e-3;
  return d;
}

ClusterShape configured_cluster(const TrainConfig& config) {
  const Placement& p = config.placement;
  // Each side's device count before any product of them is taken in int.
  const std::string devices_why = "no cluster has a million accelerators";
  check_simulated_size(static_cast<int64_t>(p.train_dp) * p.train_tp * p.train_pp,
                       kMaxSimulatedDevices,
                       "placement.train.dp x placement.train.tp x placement.train.pp", devices_why);
  check_simulated_size(p.rollout_instances, kMaxSimulatedInstances,
                       "placement.rollout.instances",
                       "the simulator visits every instance at each admission");
  check_simulated_size(static_cast<int64_t>(p.rollout_instances) * p.rollout_instance_size(),
                       kMaxSimulatedDevices,
                       "placement.rollout.instances x placement.rollout.tp x placement.rollout.ep",
                       devices_why);
  ClusterShape c;
  c.memory_utilization = config.simulate.memory_utilization;
  c.train_micro_batch_tokens = config.train.micro_batch_tokens;
  c.train_micro_batches = config.simulate.micro_batches;
  if (p.world_size() == 1) {  // one process: a trainer thread and instance threads
    c.instances = static_cast<int>(config.pipeline.instances);
    return c;
  }
  c.train_dp = p.train_dp;
  c.train_tp = p.train_tp;
  c.train_pp = p.train_pp;  // the trainer's 1F1B stages (cost_model.h: bubble, p2p)
  c.rollout_tp = p.rollout_instance_size();
  c.instances = p.rollout_instances;
  c.colocated = p.mode == PlacementMode::kColocated;
  const int64_t devices = config.simulate.devices;
  if (devices > 0) {
    check_input(!c.colocated, "needs placement.mode disaggregated (colocated devices do both)",
                "simulate.devices");
    const int64_t rest = devices - c.train_devices();
    check_input(rest >= c.rollout_tp && rest % c.rollout_tp == 0,
                std::to_string(devices) + " devices leave " + std::to_string(rest) +
                    " for rollout instances of " + std::to_string(c.rollout_tp),
                "simulate.devices", "the rest must be a positive multiple of rollout.tp");
    c.instances = static_cast<int>(rest / c.rollout_tp);
  }
  return c;
}

// Every size that sets the simulation's cost, with its bound and reason. `instances_key`
// names what set the instance count.
void check_simulated_sizes(const TrainConfig& config, const SimulationSpec& spec,
                           const std::string& instances_key) {
  check_simulated_size(config.train.iterations, kMaxSimulatedIterations, "train.iterations",
                       "a simulated run reaches its steady state within tens of iterations");
  check_simulated_size(config.rollout.prompts_per_iteration, kMaxSimulatedPrompts,
                       "rollout.prompts_per_iteration",
                       "a million prompts per iteration is far beyond any published run");
  check_simulated_size(config.rollout.n, kMaxSimulatedSamples, "rollout.n",
                       "GRPO groups hold tens of samples");
  check_simulated_size(config.rollout.max_tokens, kMaxSimulatedResponseTokens,
                       "rollout.max_tokens", "no model's context is longer");
  check_simulated_size(spec.cluster.instances, kMaxSimulatedInstances, instances_key,
                       "the simulator visits every instance at each admission");
  // The bounds above keep these products finite and exact enough in double.
  const int64_t rows = spec.prompts_per_iteration * spec.n;  // <= 2^36
  const double units = static_cast<double>(spec.iterations) * static_cast<double>(rows) *
                       (static_cast<double>(rows) + 8.0 * spec.cluster.instances);
  check_input(units <= kMaxSimulatedUnits,
              "iterations x rows x (rows + 8 x instances) = " +
                  std::to_string(spec.iterations) + " x " + std::to_string(rows) + " x (" +
                  std::to_string(rows) + " + 8 x " + std::to_string(spec.cluster.instances) +
                  ") = " + general(units) + ", about " +
                  general(units * kSimulatedSecondsPerUnit / 60) +
                  " minutes of simulation, is above aspen simulate's bound " +
                  general(kMaxSimulatedUnits) + " (about 10 minutes on 2 cores)",
              "train.iterations, rollout.prompts_per_iteration x rollout.n",
              "simulate fewer iterations (a run's steady state shows within tens of them) or "
              "fewer prompts per iteration");
}

// The spread of the short responses a calibration assumes (their mean is measured).
constexpr double kCalibratedSigma = 0.3;

// Least squares y = a x1 + b x2 (no intercept) or y = a + b x (x1 = 1).
std::pair<double, double> fit_two(const std::vector<double>& x1, const std::vector<double>& x2,
                                  const std::vector<double>& y) {
  double s11 = 0, s12 = 0, s22 = 0, s1y = 0, s2y = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    s11 += x1[i] * x1[i];
    s12 += x1[i] * x2[i];
    s22 += x2[i] * x2[i];
    s1y += x1[i] * y[i];
    s2y += x2[i] * y[i];
  }
  const double det = s11 * s22 - s12 * s12;
  double a = 0, b = 0;
  if (std::abs(det) > 1e-12 * std::max(1.0, s11 * s22)) {
    a = (s1y * s22 - s2y * s12) / det;
    b = (s2y * s11 - s1y * s12) / det;
  }
  // A negative coefficient is noise: refit on the other regressor alone.
  if (a < 0 || b < 0 || !(det != 0)) {
    if (a < 0 || b >= 0) {
      a = 0;
      b = s22 > 0 ? s2y / s22 : 0;
    } else {
      b = 0;
      a = s11 > 0 ? s1y / s11 : 0;
    }
  }
  return {a, b};
}

double number(const nlohmann::json& object, const char* key, const std::string& where) {
  check_input(object.is_object() && object.contains(key) && object.at(key).is_number(),
              std::string("no number '") + key + "'", where,
              "a record of aspen bench pipeline --json (this version)");
  return object.at(key).get<double>();
}

}  // namespace

const std::vector<std::string>& simulated_model_presets() {
  static const std::vector<std::string> names = {"qwen2.5-7b", "qwen2.5-32b", "qwen3-30b-a3b"};
  return names;
}

ModelConfig simulated_model(const TrainConfig& config) {
  const std::string& name = config.simulate.model;
  if (name == "qwen2.5-7b") return qwen25(3584, 18944, 28, 28, 4);
  if (name == "qwen2.5-32b") return qwen25(5120, 27648, 64, 40, 8);
  if (name == "qwen3-30b-a3b") return qwen3_30b_a3b();
  namespace fs = std::filesystem;
  std::string path = name.empty() ? config.model.path : name;
  if (path.empty()) return builtin_model_config(config.model, config.model.tokenizer_vocab);
  if (fs::is_directory(path)) path = (fs::path(path) / "config.json").string();
  check_input(fs::is_regular_file(path), "'" + path + "' is neither a preset nor a config.json",
              name.empty() ? "model.path" : "simulate.model",
              "a preset name (qwen2.5-7b, qwen2.5-32b, qwen3-30b-a3b), a config.json or a model "
              "directory");
  return load_hf_config(path);
}

SimulationSpec simulation_spec(const TrainConfig& config_in, bool async) {
  TrainConfig config = config_in;
  config.pipeline.mode = async ? PipelineMode::kAsync : PipelineMode::kSync;
  SimulationSpec spec;
  const LoraShape lora{config.train.lora.rank, config.train.lora.targets,
                       config.train.lora.experts};
  spec.model = model_cost(simulated_model(config), lora);
  spec.device = simulated_device(config.simulate);
  spec.cluster = configured_cluster(config);
  const bool one_process = config.placement.world_size() == 1;
  std::string instances_key = one_process                  ? "pipeline.instances"
                              : config.simulate.devices > 0 ? "simulate.devices"
                                                            : "placement.rollout.instances";
  if (!async && config.simulate.baseline == SimulateBaseline::kColocated && !one_process) {
    instances_key = "simulate.baseline colocated (every device an instance)";
    const int devices = spec.cluster.devices();
    ClusterShape& c = spec.cluster;
    const int replica = c.train_tp * c.train_pp;
    check_input(devices % replica == 0 && devices % c.rollout_tp == 0,
                std::to_string(devices) + " devices for train.tp x pp " + std::to_string(replica) +
                    " and rollout.tp " + std::to_string(c.rollout_tp),
                "simulate.baseline colocated", "both sizes must divide the device count");
    c.train_dp = devices / replica;
    c.instances = devices / c.rollout_tp;
    c.colocated = true;
  }
  check_input(!(async && spec.cluster.colocated),
              "async ASP overlaps rollout and training, which colocated devices cannot (the "
              "simulator does not model their contention)",
              "placement.mode", "simulate a disaggregated placement (simulate.devices sets the split)");
  spec.async = async;
  spec.eta = async ? config.pipeline.max_staleness : 0;
  spec.iterations = config.train.iterations;
  spec.prompts_per_iteration = config.rollout.prompts_per_iteration;
  spec.n = config.rollout.n;
  spec.dispatch_chunk = dispatch_chunk(config, spec.cluster.instances);
  spec.dispatch = config.pipeline.dispatch;
  spec.stream_updates = streams_updates(config) && spec.cluster.train_devices() == 1;
  spec.sync_every = config.pipeline.sync_every;
  spec.max_num_seqs = config.rollout.max_num_seqs;
  spec.max_num_batched_tokens = config.rollout.max_num_batched_tokens;
  spec.reference = config.algorithm.kl_coef > 0 || config.algorithm.kl_in_reward;
  spec.critic = config.algorithm.name == AlgorithmName::kPpo;
  spec.epochs = config.train.epochs;
  const int64_t rows = spec.prompts_per_iteration * spec.n;
  const int64_t mini = config.train.mini_batch_size;
  const int64_t mini_batches = mini <= 0 || mini >= rows ? 1 : (rows + mini - 1) / mini;
  spec.optimizer_steps = spec.epochs * mini_batches;
  // iteration_engine.cpp: old log-probs are recomputed unless the update is one step.
  spec.recompute_old_logprobs = spec.optimizer_steps > 1;
  spec.reward_s_per_sample = config.simulate.reward_ms * 1e-3;
  spec.weight_switch = config.simulate.drain_on_update ? WeightSwitch::kDrain
                       : config.pipeline.interrupt     ? WeightSwitch::kRecompute
                                                       : WeightSwitch::kInFlight;
  spec.tools.turns = config.simulate.turns;
  spec.tools.latency_median_s = config.simulate.tool_latency_ms * 1e-3;
  spec.tools.latency_sigma = config.simulate.tool_latency_sigma;
  spec.tools.observation_tokens = config.simulate.observation_tokens;
  spec.tools.seed = config.simulate.seed;
  spec.tools.validate();
  spec.partial_rollout = async && config.pipeline.partial_rollout;
  spec.partial_rollout_min_tokens = config.pipeline.partial_rollout_min_tokens;
  // The sync side is the baseline the seeds compare against: no over-sampling (the
  // command's sync figure with it is `pipeline.mode=async pipeline.max_staleness=0`).
  spec.over_sample_groups = async ? over_sample_groups(config) : 0;
  if (config.pipeline.weight_sync == WeightSync::kDelta) {
    spec.cluster.fetched_fraction = config.simulate.delta_fraction;
  }
  spec.lengths.median = config.simulate.length_median;
  spec.lengths.sigma = config.simulate.length_sigma;
  spec.lengths.max_tokens = config.rollout.max_tokens;
  spec.lengths.long_tail_fraction = config.rollout.long_tail_fraction;
  spec.lengths.prompt_tokens = config.simulate.prompt_tokens;
  spec.lengths.seed = config.simulate.seed;
  check_simulated_sizes(config, spec, instances_key);
  if (!config.simulate.replay.empty()) {
    spec.lengths.replay = std::make_shared<const std::vector<std::vector<int64_t>>>(
        load_replay(config.simulate.replay));
  }
  return spec;
}

std::string sync_trace_path(const std::string& trace_path) {
  const std::filesystem::path path(trace_path);
  return (path.parent_path() / (path.stem().string() + ".sync" + path.extension().string()))
      .string();
}

nlohmann::json simulate_sync_and_async(const TrainConfig& config, const std::string& trace_path) {
  // The outputs first: a trace that cannot be written is an error before the simulation.
  if (!trace_path.empty()) {
    check_output_file(trace_path, "--trace");
    check_output_file(sync_trace_path(trace_path), "--trace's sync side");
  }
  SimulationSpec sync = simulation_spec(config, false);
  SimulationSpec async = simulation_spec(config, true);
  // Not silent: simulate.devices decides the instance count (docs/simulate.md), so a
  // different placement.rollout.instances is not what is simulated.
  const Placement& placement = config.placement;
  if (config.simulate.devices > 0 && placement.world_size() > 1 &&
      async.cluster.instances != placement.rollout_instances) {
    log_warn("simulate.devices=", config.simulate.devices, " leaves the rollout ",
             async.cluster.instances, " instances of ", async.cluster.rollout_tp,
             " devices: they are simulated, not placement.rollout.instances=",
             placement.rollout_instances);
  }
  if (!config.simulate.calibration.empty()) {
    const nlohmann::json bench = nlohmann::json::parse(read_file(config.simulate.calibration),
                                                       nullptr, false);
    check_input(bench.is_object() && bench.contains("sync"), "is not an aspen bench pipeline record",
                "simulate.calibration " + config.simulate.calibration);
    const BenchCalibration calibration = calibrate_on_bench_side(bench.at("sync"), config);
    const TrainConfig calibrated = calibrated_config(calibration, config);
    sync = simulation_spec(calibrated, false);
    async = simulation_spec(calibrated, true);
    apply_calibration(calibration, sync);
    apply_calibration(calibration, async);
  }
  if (!trace_path.empty()) {
    async.trace_path = trace_path;
    sync.trace_path = sync_trace_path(trace_path);
  }
  nlohmann::json out;
  out["sync"] = run_simulation(sync);
  out["async"] = run_simulation(async);
  out["ratio"] = out["async"]["effective_tps"].get<double>() /
                 std::max(out["sync"]["effective_tps"].get<double>(), 1e-12);
  const ModelConfig model = simulated_model(config);
  out["model"] = {{"family", model.model_type()},
                  {"parameters", async.model.parameters},
                  {"matmul_parameters", async.model.matmul_parameters}};
  // What train.lora changes (model_cost.h, cost_model.h): what trains and is published,
  // the trainer's FLOPs per token (attention aside) and its state per device.
  const CostModel costs(async.model, async.device, async.cluster, async.overheads);
  out["trainer"] = {{"lora_rank", config.train.lora.rank},
                    {"trainable_parameters", async.model.trainable_parameters()},
                    {"train_flops_per_token", async.model.train_flops(1.0, 0.0)},
                    {"state_gb_per_device", costs.trainer_state_bytes() / 1e9},
                    {"published_gb", costs.published_bytes() / 1e9}};
  out["device"] = async.device.name;
  auto cluster_json = [](const ClusterShape& c) {
    return nlohmann::json{{"train", {{"dp", c.train_dp}, {"tp", c.train_tp}, {"pp", c.train_pp}}},
                          {"rollout", {{"instances", c.instances}, {"tp", c.rollout_tp}}},
                          {"colocated", c.colocated},
                          {"devices", c.devices()}};
  };
  out["cluster"] = {{"sync", cluster_json(sync.cluster)}, {"async", cluster_json(async.cluster)}};
  return out;
}

BenchCalibration calibrate_on_bench_side(const nlohmann::json& side, const TrainConfig& config) {
  const std::string where = "bench record: sync.iterations";
  check_input(side.is_object() && side.contains("iterations") && side.at("iterations").is_array() &&
                  side.at("iterations").size() >= 2,
              "fewer than 2 recorded iterations", where,
              "a record of aspen bench pipeline --json (this version)");
  std::vector<double> ones, steps, tokens, busy, packed, trainer;
  double scheduled_minus_generated = 0, groups = 0, trained = 0, rows = 0;
  const double n = static_cast<double>(config.rollout.n);
  for (const nlohmann::json& line : side.at("iterations")) {
    const nlohmann::json& work = line.at("rollout_work");
    steps.push_back(number(work, "steps", where));
    tokens.push_back(number(work, "scheduled_tokens", where));
    busy.push_back(number(work, "busy_seconds", where));
    const double response = number(line, "trained_tokens", where);
    const double row_count = number(line, "trained_rows", where);
    scheduled_minus_generated += tokens.back() - response;
    groups += row_count / n;
    trained += response;
    rows += row_count;
    double stage_seconds = 0;
    for (const auto& [stage, seconds] : line.at("stage_seconds").items()) {
      if (stage != "wait" && seconds.is_number()) stage_seconds += seconds.get<double>();
    }
    trainer.push_back(stage_seconds);
    ones.push_back(1.0);
  }
  BenchCalibration c;
  c.iterations = static_cast<int>(busy.size());
  // Each group's prompt is prefilled once and every sample's first token comes with it:
  // scheduled = prompt + sum(length - 1) per group.
  c.prompt_tokens = std::max(1.0, scheduled_minus_generated / std::max(groups, 1.0) + n);
  for (size_t i = 0; i < trainer.size(); ++i) {
    const nlohmann::json& line = side.at("iterations")[i];
    packed.push_back(line.at("trained_rows").get<double>() * c.prompt_tokens +
                     line.at("trained_tokens").get<double>());
  }
  std::tie(c.step_s, c.token_s) = fit_two(steps, tokens, busy);
  std::tie(c.update_fixed_s, c.train_token_s) = fit_two(ones, packed, trainer);
  // Responses outside the long tail: the run's groups are 0, 1, ... in admission order.
  int64_t long_groups = 0;
  const auto total_groups = static_cast<int64_t>(std::llround(groups));
  for (int64_t g = 0; g < total_groups; ++g) {
    long_groups += in_long_tail(config.rollout.long_tail_fraction, g) ? 1 : 0;
  }
  const double long_rows = static_cast<double>(long_groups) * n;
  c.short_response_mean = std::max(
      1.0, (trained - long_rows * static_cast<double>(config.rollout.max_tokens)) /
               std::max(1.0, rows - long_rows));
  return c;
}

TrainConfig calibrated_config(const BenchCalibration& calibration, TrainConfig config) {
  SimulateSection& s = config.simulate;
  s.device = "cpu";
  s.baseline = SimulateBaseline::kSame;
  s.prompt_tokens = std::max<int64_t>(1, std::llround(calibration.prompt_tokens));
  s.length_sigma = kCalibratedSigma;
  // The log-normal's median for the measured mean: mean = median exp(sigma^2 / 2).
  s.length_median = std::max(
      1.0, calibration.short_response_mean / std::exp(kCalibratedSigma * kCalibratedSigma / 2));
  s.calibration.clear();
  return config;
}

void apply_calibration(const BenchCalibration& calibration, SimulationSpec& spec) {
  spec.device.roofline = false;
  spec.device.step_overhead_s = calibration.step_s;
  spec.device.token_overhead_s = calibration.token_s;
  spec.overheads.train_token_s = calibration.train_token_s;
  spec.overheads.forward_token_s = calibration.train_token_s / 3.0;  // forward ~ 1/3 of a step
  spec.overheads.update_fixed_s = calibration.update_fixed_s;
}

}  // namespace aspen::sim

namespace aspen::sim {

nlohmann::json simulate_bench_pipeline(const nlohmann::json& bench) {
  check_input(bench.is_object() && bench.contains("workload") && bench.contains("sync") &&
                  bench.contains("async"),
              "no workload, sync or async", "bench record", "a record of aspen bench pipeline --json");
  Config workload = Config::parse(bench.at("workload").dump(), "bench record: workload");
  const TrainConfig config = parse_train_config(workload);
  const BenchCalibration calibration = calibrate_on_bench_side(bench.at("sync"), config);
  const TrainConfig calibrated = calibrated_config(calibration, config);
  nlohmann::json out;
  double simulated[2] = {0, 0}, measured[2] = {0, 0};
  for (int side = 0; side < 2; ++side) {
    const char* name = side == 0 ? "sync" : "async";
    SimulationSpec spec = simulation_spec(calibrated, side == 1);
    apply_calibration(calibration, spec);
    const nlohmann::json result = run_simulation(spec);
    simulated[side] = result.at("effective_tps").get<double>();
    measured[side] = number(bench.at(name), "effective_tps", std::string("bench record: ") + name);
    out[name] = {{"measured_tps", measured[side]},
                 {"simulated_tps", simulated[side]},
                 {"error", simulated[side] / measured[side] - 1.0},
                 {"simulated_bubbles", result.at("bubbles")}};
  }
  const double measured_ratio = measured[1] / measured[0];
  const double simulated_ratio = simulated[1] / simulated[0];
  out["ratio"] = {{"measured", measured_ratio},
                  {"simulated", simulated_ratio},
                  {"error", simulated_ratio / measured_ratio - 1.0}};
  out["calibration"] = {{"step_s", calibration.step_s},
                        {"token_s", calibration.token_s},
                        {"update_fixed_s", calibration.update_fixed_s},
                        {"train_token_s", calibration.train_token_s},
                        {"prompt_tokens", calibration.prompt_tokens},
                        {"short_response_mean", calibration.short_response_mean},
                        {"iterations", calibration.iterations}};
  return out;
}

}  // namespace aspen::sim
