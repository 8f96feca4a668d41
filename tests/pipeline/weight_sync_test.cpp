// pipeline.weight_sync: delta end to end: the trainer's publisher puts deltas on the
// dock's board after real AdamW steps, a rollout instance's receiver fetches them
// (skipping versions now and then, in this process or over ZeroMQ) and its engine
// loads the result, which equals the trainer's weights bit for bit after every
// publish; LoRA runs publish their adapters full; and a whole run with delta sync
// trains exactly as one with full sync, its instances having loaded deltas.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>

#include "aspen/dock/controller_protocol.h"
#include "aspen/dock/in_process_transport.h"
#include "aspen/dock/zmq_transport.h"
#include "aspen/pipeline/rl_rows.h"
#include "aspen/pipeline/rl_run.h"
#include "aspen/pipeline/weight_publisher.h"
#include "aspen/pipeline/weight_receiver.h"
#include "aspen/rollout/engine.h"
#include "aspen/train/optimizer.h"
#include "model/tiny_configs.h"
#include "tiny_run.h"

namespace aspen::pipeline {
namespace {

namespace fs = std::filesystem;

TrainConfig delta_config() {
  Config config = Config::empty();
  config.apply_override("pipeline.weight_sync=delta");
  return parse_train_config(config);
}

// One AdamW step of the optimizer the trainer uses, on a language-model loss.
void train_step(QwenForCausalLM& policy, Optimizer& optimizer, std::mt19937& rng) {
  std::uniform_int_distribution<int64_t> token(0, policy->config.vocab_size - 1);
  std::vector<int64_t> ids(12);
  for (int64_t& id : ids) id = token(rng);
  const torch::Tensor input = torch::tensor(ids, torch::kInt64);
  const torch::Tensor cu = torch::tensor(std::vector<int64_t>{0, 12}, torch::kInt64);
  (-policy->token_logprobs(input, cu).logprobs.mean()).backward();
  optimizer.step();
}

void expect_engine_holds(const QwenForCausalLM& instance, const QwenForCausalLM& trainer,
                         int64_t version) {
  std::map<std::string, torch::Tensor> want;
  for (const auto& [name, tensor] : trainer->hf_state()) want[name] = tensor;
  for (const auto& [name, tensor] : instance->hf_state()) {
    ASSERT_TRUE(want.count(name)) << name;
    EXPECT_TRUE(torch::equal(tensor, want.at(name))) << name << " at version " << version;
  }
}

// The trainer's dock and an instance's view of it: the same dock in one process, a
// reader-only dock over ZeroMQ for an instance in another process.
struct SyncDocks {
  std::unique_ptr<ControllerService> controller;
  std::unique_ptr<TransferDock> trainer;
  std::unique_ptr<TransferDock> reader;

  explicit SyncDocks(bool remote) {
    if (!remote) {
      trainer = std::make_unique<TransferDock>(std::make_shared<InProcessTransport>(
          std::make_shared<InProcessDock>(make_rl_schema({}), DockControllerOptions{64}, 1), 0));
      return;
    }
    const std::string token = "weight-sync-test-token";
    controller = std::make_unique<ControllerService>(
        std::make_shared<DockController>(make_rl_schema({}), DockControllerOptions{64}),
        ZmqServiceOptions{"tcp://127.0.0.1:*", token});
    ZmqTransportOptions options;
    options.controller_endpoint = controller->endpoint();
    options.token = token;
    options.rpc_timeout_s = 30.0;
    trainer = std::make_unique<TransferDock>(std::make_shared<ZmqTransport>(options));
    options.reader_only = true;
    reader = std::make_unique<TransferDock>(std::make_shared<ZmqTransport>(options));
  }
  TransferDock& instance_dock() { return reader ? *reader : *trainer; }
};

class DeltaWeightSync : public ::testing::TestWithParam<bool> {};

TEST_P(DeltaWeightSync, TheInstanceEqualsTheTrainerBitForBitAfterEveryPublish) {
  const TrainConfig config = delta_config();
  torch::manual_seed(7);
  QwenForCausalLM policy(testing::tiny_config(ModelFamily::kQwen3, /*tied=*/true, 8));
  // The instance starts on a copy of version 0, as a run's instances do.
  QwenForCausalLM instance(policy->config);
  {
    torch::NoGradGuard no_grad;
    std::map<std::string, torch::Tensor> initial;
    for (const auto& [name, tensor] : policy->hf_state()) initial[name] = tensor.clone();
    instance->load_state(initial, "version 0");
  }
  EngineConfig engine_config;
  engine_config.num_blocks = 4;  // it never generates here
  RolloutEngine engine(instance, engine_config);
  OptimizerOptions adamw;
  adamw.lr = 1e-5;
  Optimizer optimizer(policy->named_parameters(/*recurse=*/true).pairs(), adamw);
  WeightPublisher publisher(config, policy->config, engine_layout(config, 0, 1), 0, std::nullopt);
  SyncDocks docks(GetParam());
  const WarehouseId where = docks.trainer->transport().local_warehouse_id();
  WeightReceiver receiver(config.pipeline.weight_sync);
  std::mt19937 rng(3);

  publisher.publish(policy, policy, 0, *docks.trainer);
  EXPECT_FALSE(publisher.last_publish().delta);  // nothing to start a delta from
  // The engine holds version 0 already: the receiver takes the set, the engine keeps its.
  EXPECT_EQ(receiver.fetch(docks.instance_dock(), where, engine.policy_version()), nullptr);
  int64_t delta_fetches = 0;
  std::map<int64_t, int64_t> delta_bytes;  // by version
  for (int64_t version = 1; version <= 8; ++version) {
    train_step(policy, optimizer, rng);
    publisher.publish(policy, policy, version, *docks.trainer);
    delta_bytes[version] = publisher.last_publish().bytes;
    EXPECT_TRUE(publisher.last_publish().delta) << version;
    EXPECT_LT(publisher.last_publish().bytes, publisher.last_publish().set_bytes) << version;
    // The instance was busy at versions 2, 5 and 6: it skips them, and then fetches
    // the deltas since the version it holds, unless together they are not smaller
    // than the set (the board trims them: the full set).
    const std::map<int64_t, int64_t> held_before = {{1, 0}, {3, 1}, {4, 3}, {7, 4}, {8, 7}};
    if (!held_before.count(version)) continue;
    int64_t chain = 0;
    for (int64_t v = held_before.at(version) + 1; v <= version; ++v) chain += delta_bytes.at(v);
    const int64_t deltas_expected =
        chain < publisher.last_publish().set_bytes ? version - held_before.at(version) : 0;
    std::shared_ptr<const WeightSet> set =
        receiver.fetch(docks.instance_dock(), where, engine.policy_version());
    ASSERT_NE(set, nullptr) << version;
    ASSERT_EQ(set->version, version);
    EXPECT_EQ(receiver.last().deltas, deltas_expected) << version;
    delta_fetches += receiver.last().deltas;
    engine.load_weights(set->version,
                        std::map<std::string, torch::Tensor>(set->tensors.begin(), set->tensors.end()));
    expect_engine_holds(instance, policy, version);
  }
  EXPECT_GE(delta_fetches, 5);  // every fetch but (maybe) the one after three skips
  EXPECT_EQ(engine.policy_version(), 8);
}

INSTANTIATE_TEST_SUITE_P(InProcessAndOverTheWire, DeltaWeightSync, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("Remote") : std::string("InProcess");
                         });

TEST(DeltaWeightSync, LoraRunsPublishTheirAdaptersWithoutADelta) {
  const TrainConfig config = delta_config();
  torch::manual_seed(8);
  QwenForCausalLM policy(testing::tiny_config(ModelFamily::kQwen3, /*tied=*/true, 8));
  LoraOptions lora;
  lora.rank = 2;
  policy->attach_lora(lora);
  WeightPublisher publisher(config, policy->config, engine_layout(config, 0, 1), 0, std::nullopt);
  SyncDocks docks(false);
  const WarehouseId where = docks.trainer->transport().local_warehouse_id();
  publisher.publish(policy, policy, 0, *docks.trainer);
  {
    torch::NoGradGuard no_grad;
    for (auto& [name, tensor] : policy->lora_state()) tensor.add_(1e-3);
  }
  publisher.publish(policy, policy, 1, *docks.trainer);
  EXPECT_FALSE(publisher.last_publish().delta);
  const WeightUpdate update = docks.trainer->weight_update(where, 0);
  ASSERT_NE(update.full, nullptr);
  EXPECT_EQ(update.full->tensors.size(), policy->lora_state().size());  // the adapters only
}

TEST(DeltaWeightSync, ARunWithDeltaSyncTrainsExactlyAsOneWithFullSync) {
  const std::string dir = ::testing::TempDir() + "/aspen_weight_sync";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const std::string sync : {"full", "delta"}) {
    const TrainConfig config = testing::tiny_run_config(
        {"pipeline.mode=async", "pipeline.max_staleness=0", "pipeline.instances=2",
         "train.iterations=3", "pipeline.weight_sync=" + sync,
         "logging.trace=" + dir + "/" + sync + ".json"});
    RlSetup setup = build_rl_setup(config);
    run_rl(config, setup, RunOptions{dir + "/" + sync});
  }
  const auto full = read_rl_metrics(dir + "/full");
  const auto delta = read_rl_metrics(dir + "/delta");
  ASSERT_EQ(full.size(), 3u);
  ASSERT_EQ(delta.size(), 3u);
  for (size_t i = 0; i < full.size(); ++i) {
    // The instances generated with the same weights: the same samples, the same update.
    // (JSON numbers compare exactly; groups may finish in another order.)
    for (const char* key : {"rows", "trained_tokens", "policy_version", "reward_mean",
                            "response_length_mean", "policy_loss", "grad_norm"}) {
      ASSERT_TRUE(full[i].contains(key)) << key;
      EXPECT_EQ(delta[i][key], full[i][key]) << key << " at " << i;
    }
    auto lengths = [](const nlohmann::json& groups) {
      std::vector<int64_t> out;
      for (const auto& group : groups) {
        for (const auto& length : group) out.push_back(length.get<int64_t>());
      }
      std::sort(out.begin(), out.end());
      return out;
    };
    EXPECT_EQ(lengths(delta[i]["response_lengths"]), lengths(full[i]["response_lengths"])) << i;
  }
  // Every load after the first took deltas in the delta run, none in the full run.
  auto loads = [&](const std::string& sync) {
    std::ifstream in(dir + "/" + sync + ".json");
    const nlohmann::json trace = nlohmann::json::parse(in);
    std::vector<int64_t> deltas;
    for (const auto& event : trace["traceEvents"]) {
      if (event["ph"] == "X" && event["name"] == "load weights") {
        deltas.push_back(event["args"]["deltas"].get<int64_t>());
      }
    }
    return deltas;
  };
  const std::vector<int64_t> delta_loads = loads("delta");
  ASSERT_FALSE(delta_loads.empty());
  for (int64_t d : delta_loads) EXPECT_GE(d, 1);
  for (int64_t d : loads("full")) EXPECT_EQ(d, 0);
}

}  // namespace
}  // namespace aspen::pipeline
