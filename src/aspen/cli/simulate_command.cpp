// `aspen simulate [CONFIG.yaml] [key=value ...] [--json] [--trace PATH]
//  [--sweep key=v1,v2,...]`: the run a config describes, on a simulated cluster, sync
// against async ASP (sim/simulation_spec.h, docs/simulate.md). The config is a training
// config (the run you would launch) plus its simulate.* keys. With no config file: the
// seeds' setting below (Qwen2.5-7B on 64 H200s), which overrides still change.
// --trace PATH writes the async side's Chrome trace (and the sync side's beside it).
// --sweep key=v1,v2,... simulates once per value and tabulates sync and async effective
// tokens/s, the ratio and the async bubbles, and names the best value.
// --compare-pp D costs the trainer's optimizer step at every split tp x pp = D of a
// data-parallel replica's D devices: TP's collectives against PP's bubble and p2p
// (sim/trainer_layouts.h), and names the fastest that fits.
#include <iostream>

#include "aspen/cli/command.h"
#include "aspen/cli/imports.h"
#include "aspen/config/train_config.h"
#include "aspen/sim/simulation_spec.h"
#include "aspen/sim/trainer_layouts.h"
#include "aspen/util/config.h"
#include "aspen/util/error.h"

namespace aspen::cli {
// Named, not anonymous: the CLI is a unity build (one namespace per subcommand file).
namespace simulate_command {

// The seeds' dense setting (docs/simulate.md explains each choice), as
// examples/simulate/qwen2.5-7b.yaml writes it: Qwen2.5-7B, 64 H200s split 44 trainers
// (DP 11 x TP 4) and 20 rollout instances of one device, GRPO with a KL term and 4
// optimizer steps per update, 256 prompts x 16 samples of up to 16k tokens (log-normal
// around 2k plus a 2% long tail to the cap); async at Aspen's recommendation for this
// scale: eta 4, without over-sampling (docs/simulate.md, "Beyond ASP").
const std::vector<std::string> kSeedsSetting = {
    "simulate.model=qwen2.5-7b",        "simulate.device=h200",
    "simulate.devices=64",              "placement.mode=disaggregated",
    "placement.train.dp=11",            "placement.train.tp=4",
    "placement.rollout.instances=20",   "placement.rollout.tp=1",
    "rollout.prompts_per_iteration=256", "rollout.n=16",
    "rollout.max_tokens=16384",         "rollout.long_tail_fraction=0.02",
    "rollout.max_num_seqs=256",         "rollout.max_num_batched_tokens=8192",
    "simulate.length_median=2048",      "simulate.length_sigma=0.7",
    "simulate.prompt_tokens=512",       "algorithm.kl_coef=0.001",
    "train.mini_batch_size=1024",       "train.iterations=100",
    "pipeline.max_staleness=4"};

struct SimulateOptions {
  std::vector<std::string> arguments;
  std::string trace;
  std::string sweep;
  int compare_pp = 0;  // > 0: compare the tp x pp splits of this many devices
};

TrainConfig config_of(std::vector<std::string> arguments) {
  bool has_file = false;
  for (const auto& a : arguments) has_file |= a.find('=') == std::string::npos;
  if (!has_file) arguments.insert(arguments.begin(), kSeedsSetting.begin(), kSeedsSetting.end());
  Config config = Config::from_arguments(arguments);
  return parse_train_config(config);
}

nlohmann::json sweep(const SimulateOptions& options) {
  const size_t eq = options.sweep.find('=');
  check_input(eq != std::string::npos && eq > 0 && eq + 1 < options.sweep.size(),
              "'" + options.sweep + "'", "--sweep", "key=v1,v2,... (e.g. pipeline.max_staleness=0,1,2)");
  const std::string key = options.sweep.substr(0, eq);
  std::vector<std::string> values;
  std::string rest = options.sweep.substr(eq + 1);
  for (size_t start = 0; start <= rest.size();) {
    const size_t comma = rest.find(',', start);
    const std::string value = rest.substr(start, comma == std::string::npos ? std::string::npos
                                                                           : comma - start);
    check_input(!value.empty(), "an empty value in '" + options.sweep + "'", "--sweep");
    values.push_back(value);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  // Every value's config and sizes before the first simulation: a bad last value is an
  // error now, not after the others ran.
  std::vector<TrainConfig> configs;
  for (const std::string& value : values) {
    std::vector<std::string> arguments = options.arguments;
    arguments.push_back(key + "=" + value);
    configs.push_back(config_of(arguments));
    simulation_spec(configs.back(), false);
    simulation_spec(configs.back(), true);
  }
  nlohmann::json rows = nlohmann::json::array();
  nlohmann::json best;
  for (size_t i = 0; i < values.size(); ++i) {
    const std::string& value = values[i];
    const nlohmann::json result = simulate_sync_and_async(configs[i], "");
    nlohmann::json row = {{"value", value},
                          {"sync_tps", result["sync"]["effective_tps"]},
                          {"async_tps", result["async"]["effective_tps"]},
                          {"ratio", result["ratio"]},
                          {"async_seconds_per_step", result["async"]["seconds_per_step"]},
                          {"async_bubbles", result["async"]["bubbles"]},
                          {"async_utilisation", result["async"]["utilisation"]},
                          {"cluster", result["cluster"]["async"]}};
    if (best.is_null() || row["async_tps"].get<double>() > best["async_tps"].get<double>()) {
      best = {{"value", value}, {"async_tps", row["async_tps"]}, {"ratio", row["ratio"]}};
    }
    rows.push_back(row);
  }
  return {{"sweep", key}, {"rows", rows}, {"best_async", best}};
}

void setup(CLI::App& root) {
  auto options = std::make_shared<SimulateOptions>();
  auto json = std::make_shared<bool>(true);
  CLI::App* command = root.add_subcommand(
      "simulate", "Sync vs async ASP of a run on a simulated cluster (docs/simulate.md)");
  command->add_option("config", options->arguments,
                      "CONFIG.yaml and/or key.sub=value overrides (default: the seeds' "
                      "Qwen2.5-7B on 64 H200s)");
  command->add_flag("--json", *json, "print JSON (the only format)");
  command->add_option("--trace", options->trace,
                      "write the async side's Chrome trace here (the sync side's beside it)");
  command->add_option("--sweep", options->sweep,
                      "key=v1,v2,...: simulate once per value and tabulate");
  command->add_option("--compare-pp", options->compare_pp,
                      "D: the trainer's step at every tp x pp = D split of a data-parallel "
                      "replica (pipeline against tensor parallelism)");
  on_run(command, [options] {
    check_input(options->trace.empty() || options->sweep.empty(),
                "a sweep writes no trace (one per value would overwrite each other)", "--trace",
                "trace one value without --sweep");
    if (options->compare_pp != 0) {
      check_input(options->trace.empty() && options->sweep.empty(),
                  "compares trainer layouts without simulating a run", "--compare-pp",
                  "use it without --trace and --sweep");
      std::cout << compare_trainer_layouts(config_of(options->arguments), options->compare_pp)
                       .dump(2)
                << '\n';
      return 0;
    }
    const nlohmann::json result =
        options->sweep.empty()
            ? simulate_sync_and_async(config_of(options->arguments), options->trace)
            : sweep(*options);
    std::cout << result.dump(2) << '\n';
    return 0;
  });
}

ASPEN_REGISTER_COMMAND(27, setup);

}  // namespace simulate_command
}  // namespace aspen::cli
