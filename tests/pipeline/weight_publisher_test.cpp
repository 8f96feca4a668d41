// The engine's weight publishing on its own, in one process: the actor trains the full
// policy itself (nothing to gather), and each publish puts that policy's weights, under
// its version, on the dock's board for the instances.
#include "aspen/pipeline/weight_publisher.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>

#include "aspen/dock/in_process_transport.h"
#include "aspen/pipeline/rl_rows.h"
#include "model/tiny_configs.h"

namespace aspen::pipeline {
namespace {

TEST(WeightPublisher, OneProcessPublishesTheFullPolicyOnTheDocksBoardByVersion) {
  Config empty = Config::empty();
  const TrainConfig config = parse_train_config(empty);
  torch::manual_seed(3);
  QwenForCausalLM policy(testing::tiny_config(ModelFamily::kQwen3, /*tied=*/false, 8));
  const EngineLayout layout = engine_layout(config, 0, 1);
  WeightPublisher publisher(config, policy->config, layout, /*world_size=*/0, std::nullopt);
  EXPECT_FALSE(publisher.gathers_full_policy());
  EXPECT_EQ(publisher.own_shards(), nullptr);
  EXPECT_FALSE(publisher.reshard_bytes_moved().has_value());

  TransferDock dock(std::make_shared<InProcessTransport>(
      std::make_shared<InProcessDock>(make_rl_schema({}), DockControllerOptions{64}, 1), 0));
  const WarehouseId here = dock.transport().local_warehouse_id();
  publisher.publish(policy, policy, /*version=*/1, dock);
  auto published = dock.latest_weights(here, /*newer_than=*/0);
  ASSERT_NE(published, nullptr);
  EXPECT_EQ(published->version, 1);
  std::map<std::string, torch::Tensor> by_name(published->tensors.begin(),
                                               published->tensors.end());
  for (const auto& [name, tensor] : policy->hf_state()) {
    ASSERT_TRUE(by_name.count(name)) << name;
    EXPECT_TRUE(torch::equal(by_name.at(name), tensor)) << name;
  }
  EXPECT_EQ(dock.latest_weights(here, /*newer_than=*/1), nullptr);  // nothing newer yet

  publisher.publish(policy, policy, 2, dock);
  ASSERT_NE(dock.latest_weights(here, 1), nullptr);
  EXPECT_EQ(dock.latest_weights(here, 1)->version, 2);
}

}  // namespace
}  // namespace aspen::pipeline
