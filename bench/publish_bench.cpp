#include "bench/publish_bench.h"

#include <ATen/Parallel.h>

#include <chrono>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "aspen/dock/controller_protocol.h"
#include "aspen/dock/transfer_dock.h"
#include "aspen/dock/zmq_transport.h"
#include "aspen/model/lora.h"
#include "aspen/model/weights_init.h"
#include "aspen/parallel/compute_threads.h"
#include "aspen/pipeline/weight_publisher.h"
#include "aspen/rollout/engine.h"
#include "aspen/util/blas_threads.h"
#include "aspen/util/error.h"
#include "aspen/util/seconds_since.h"
#include "bench/imports.h"

namespace aspen::bench {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

ModelConfig publish_model_config(const PublishBenchOptions& o) {
  ModelConfig config;
  config.family = ModelFamily::kQwen3;
  config.vocab_size = o.vocab_size;
  config.hidden_size = o.hidden_size;
  config.intermediate_size = o.intermediate_size;
  config.num_hidden_layers = o.num_layers;
  config.num_attention_heads = o.num_heads;
  config.num_key_value_heads = o.num_kv_heads;
  config.head_dim = o.head_dim;
  config.max_position_embeddings = 4096;
  config.tie_word_embeddings = true;  // as Qwen3-0.6B
  return config;
}

PublishDocks::PublishDocks(bool remote) {
  std::random_device device;
  const std::string token = "publish-bench-" + std::to_string(device()) + std::to_string(device());
  auto dock_controller = std::make_shared<DockController>(
      DockSchema({{"data", torch::kUInt8, ColumnKind::kPerRow}}, {{"train", {"data"}}}),
      DockControllerOptions{16});
  controller = std::make_unique<ControllerService>(
      dock_controller, ZmqServiceOptions{"tcp://127.0.0.1:*", token});
  ZmqTransportOptions transport;
  transport.controller_endpoint = controller->endpoint();
  transport.token = token;
  transport.rpc_timeout_s = 600.0;
  transport.max_message_bytes = size_t{1} << 36;  // as a distributed run (distributed_dock.cpp)
  trainer = std::make_unique<TransferDock>(std::make_shared<ZmqTransport>(transport));
  where = trainer->transport().local_warehouse_id();
  if (remote) {
    transport.reader_only = true;
    reader = std::make_unique<TransferDock>(std::make_shared<ZmqTransport>(transport));
  }
}

int64_t parameter_count(const QwenForCausalLM& policy) {
  int64_t parameters = 0;
  for (const auto& p : policy->parameters()) parameters += p.numel();
  return parameters;
}

EngineConfig publish_engine_config() {
  EngineConfig config;
  config.num_blocks = 4;
  config.max_num_seqs = 1;
  return config;
}

namespace {

int64_t set_bytes(const WeightSet& set) {
  int64_t bytes = 0;
  for (const auto& entry : set.tensors) bytes += entry.second.numel() * entry.second.element_size();
  return bytes;
}

// One mode's publishes: `reps` timed after one warm-up, versions counting on from
// `version` (the engine only takes a newer version).
nlohmann::json time_publishes(QwenForCausalLM& policy, RolloutEngine& engine,
                              PublishDocks& docks, int reps, int64_t& version) {
  double snapshot_s = 0, fetch_s = 0, load_s = 0;
  int64_t bytes = 0, tensors = 0;
  for (int rep = -1; rep < reps; ++rep) {
    ++version;
    auto start = Clock::now();
    std::shared_ptr<const WeightSet> set = weight_set_of(policy, version);
    docks.trainer->publish_weights(set);
    const double snapshot = seconds_since(start);
    bytes = set_bytes(*set);
    tensors = static_cast<int64_t>(set->tensors.size());
    set.reset();  // the board holds it now: the trainer keeps no copy of its own

    start = Clock::now();
    std::shared_ptr<const WeightSet> fetched =
        docks.instance_dock().latest_weights(docks.where, engine.policy_version());
    const double fetch = seconds_since(start);
    check_input(fetched != nullptr && fetched->version == version,
                "the instance did not fetch version " + std::to_string(version),
                "aspen bench publish");

    start = Clock::now();
    engine.load_weights(fetched->version, std::map<std::string, torch::Tensor>(
                                              fetched->tensors.begin(), fetched->tensors.end()));
    const double load = seconds_since(start);
    fetched.reset();
    if (rep < 0) continue;  // warm-up: first touches of the pages and the sockets
    snapshot_s += snapshot / reps;
    fetch_s += fetch / reps;
    load_s += load / reps;
  }
  return {{"tensors", tensors},       {"bytes", bytes},   {"snapshot_s", snapshot_s},
          {"fetch_s", fetch_s},       {"load_s", load_s}, {"seconds", snapshot_s + fetch_s + load_s}};
}

}  // namespace

void PublishBenchOptions::validate() const {
  const std::string where = "aspen bench publish";
  check_input(hidden_size > 0 && intermediate_size > 0 && num_layers > 0 && vocab_size > 0,
              "model sizes must be > 0", where + " --hidden-size/--intermediate-size/--layers/--vocab-size");
  check_input(num_heads > 0 && num_kv_heads > 0 && num_heads % num_kv_heads == 0 && head_dim > 0,
              "--heads must be a positive multiple of --kv-heads, --head-dim > 0",
              where + " --heads/--kv-heads/--head-dim");
  check_input(lora_rank > 0, "must be > 0, got " + std::to_string(lora_rank), where + " --lora-rank");
  check_input(lora_alpha > 0, "must be > 0", where + " --lora-alpha");
  check_input(fetch == "remote" || fetch == "local",
              "expected remote or local, got \"" + fetch + "\"", where + " --fetch");
  check_input(reps >= 1, "must be >= 1, got " + std::to_string(reps), where + " --reps");
  check_input(!lrs.empty(), "give at least one learning rate", where + " --lrs");
  for (double lr : lrs) check_input(lr > 0, "must be > 0", where + " --lrs");
  check_input(warmup_steps >= 0, "must be >= 0", where + " --warmup-steps");
  check_input(delta_dtype == "fp32" || delta_dtype == "bf16",
              "expected fp32 or bf16, got \"" + delta_dtype + "\"", where + " --dtype");
  check_input(zstd_level >= -5 && zstd_level <= 19, "expected -5..19, got " + std::to_string(zstd_level),
              where + " --zstd-level");
}

nlohmann::json run_publish_bench(const PublishBenchOptions& options) {
  options.validate();
  set_compute_threads(options.threads, "--threads");
  torch::NoGradGuard no_grad;
  QwenForCausalLM policy = make_random_model(publish_model_config(options), /*seed=*/0);
  const int64_t parameters = parameter_count(policy);

  PublishDocks docks(options.fetch == "remote");
  RolloutEngine engine(policy, publish_engine_config());
  int64_t version = 0;

  nlohmann::json result;
  result["full"] = time_publishes(policy, engine, docks, options.reps, version);

  LoraOptions lora;
  lora.rank = options.lora_rank;
  lora.alpha = options.lora_alpha;
  torch::manual_seed(1);
  policy->attach_lora(lora);
  // PEFT's B starts at zero; a trained adapter's is not (the values do not change the
  // cost, but a publish of zeros would be a poor stand-in).
  for (auto& [name, tensor] : policy->lora_state()) {
    if (name.find(".lora_B.") != std::string::npos) tensor.normal_(0.0, 0.02);
  }
  int64_t lora_parameters = 0;
  for (const auto& entry : policy->lora_state()) lora_parameters += entry.second.numel();
  result["adapter"] = time_publishes(policy, engine, docks, options.reps, version);

  result["model"] = {{"source", "random qwen3"},
                     {"layers", options.num_layers},
                     {"hidden_size", options.hidden_size},
                     {"heads", std::to_string(options.num_heads) + "/" +
                                   std::to_string(options.num_kv_heads) + " of " +
                                   std::to_string(options.head_dim)},
                     {"intermediate_size", options.intermediate_size},
                     {"vocab_size", options.vocab_size},
                     {"parameters", parameters},
                     {"dtype", "fp32"},
                     {"lora_rank", options.lora_rank},
                     {"lora_targets", lora.targets},
                     {"lora_parameters", lora_parameters},
                     {"fetch", options.fetch},
                     {"reps", options.reps},
                     {"threads", at::get_num_threads()},
                     {"blas_threads", blas_threads()}};
  const double full_bytes = result["full"]["bytes"].get<double>();
  const double adapter_bytes = result["adapter"]["bytes"].get<double>();
  result["bytes_ratio"] = full_bytes / adapter_bytes;
  result["seconds_ratio"] =
      result["full"]["seconds"].get<double>() / result["adapter"]["seconds"].get<double>();
  return result;
}

}  // namespace aspen::bench
