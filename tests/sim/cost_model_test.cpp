// The cost model's closed forms against their step-by-step definitions.
#include <gtest/gtest.h>

#include "aspen/sim/cost_model.h"

namespace aspen::sim {
namespace {

ModelCost small_model() {
  ModelCost m;
  m.layers = 28;
  m.hidden = 3584;
  m.parameters = 7.6e9;
  m.matmul_parameters = 7.0e9;
  m.attention_flops_per_pair = 28 * 2.0 * 28 * 256;
  m.kv_elements_per_token = 28 * 2.0 * 4 * 128;
  return m;
}

TEST(CostModel, DecodeSegmentSumsItsStepsInClosedForm) {
  const CostModel costs(small_model(), device_preset("h200"), ClusterShape{});
  // Small batches are bandwidth-bound, large ones compute-bound: the sum crosses over.
  for (int64_t batch : {1, 8, 64, 512}) {
    for (double context0 : {0.0, 5e4, 2e6}) {
      double loop = 0;
      for (int64_t j = 0; j < 300; ++j) {
        loop += costs.engine_step_s(batch, context0 + static_cast<double>(batch * j), 0, 0);
      }
      EXPECT_NEAR(costs.decode_steps_s(300, batch, context0), loop, 1e-9 * loop)
          << batch << " " << context0;
    }
  }
}

TEST(CostModel, StepsWithinInvertsTheSegmentTime) {
  const CostModel costs(small_model(), device_preset("h100"), ClusterShape{});
  const double t = costs.decode_steps_s(137, 32, 1e5);
  EXPECT_EQ(costs.decode_steps_within(t, 32, 1e5, 1000), 137);
  EXPECT_EQ(costs.decode_steps_within(t * 0.999, 32, 1e5, 1000), 136);
  EXPECT_EQ(costs.decode_steps_within(1e9, 32, 1e5, 50), 50);
}

TEST(CostModel, SingleSequenceDecodeIsTheWeightReadAtTheAchievedBandwidth) {
  DevicePreset device = device_preset("h200");
  device.step_overhead_s = 0;
  const CostModel costs(small_model(), device, ClusterShape{});
  const double weights = 7.6e9 * 2;
  EXPECT_NEAR(costs.engine_step_s(1, 0, 0, 0),
              weights / (device.memory_bandwidth * device.decode_bandwidth_efficiency), 1e-12);
  // TP 2 halves the bytes per device and adds two all-reduces per layer.
  ClusterShape tp2;
  tp2.rollout_tp = 2;
  const CostModel split(small_model(), device, tp2);
  EXPECT_LT(split.engine_step_s(1, 0, 0, 0), costs.engine_step_s(1, 0, 0, 0));
}

TEST(CostModel, KvCapacityIsTheMemoryTheWeightsLeave) {
  ClusterShape cluster;
  cluster.memory_utilization = 0.9;
  const CostModel costs(small_model(), device_preset("h200"), cluster);
  const double free = 141e9 * 0.9 - 7.6e9 * 2;
  EXPECT_EQ(costs.kv_capacity_tokens(), static_cast<int64_t>(free / (28 * 2.0 * 4 * 128 * 2)));
  DevicePreset tiny = device_preset("h100");
  tiny.memory_bytes = 10e9;  // less than the weights
  EXPECT_THROW(CostModel(small_model(), tiny, cluster).kv_capacity_tokens(), Error);
}

TEST(CostModel, AHugeDeviceMemoryGivesAPositiveCappedKvCapacity) {
  // 1e300 bytes over 2^63 tokens once cast to int64 as -9223372036854775808.
  DevicePreset huge = device_preset("h200");
  huge.memory_bytes = 1e300;
  EXPECT_EQ(CostModel(small_model(), huge, ClusterShape{}).kv_capacity_tokens(),
            int64_t{1} << 50);
}

TEST(CostModel, TrainingIsThreeForwardPassesOverTheTrainers) {
  DevicePreset device = device_preset("h200");
  ClusterShape cluster;
  cluster.train_dp = 4;
  const CostModel costs(small_model(), device, cluster);
  const double flops = small_model().forward_flops(1e5, 3e6);
  EXPECT_NEAR(costs.forward_s(1e5, 3e6), flops / (4 * device.peak_flops * device.train_mfu), 1e-12);
  EXPECT_NEAR(costs.train_s(1e5, 3e6), 3 * costs.forward_s(1e5, 3e6), 1e-12);
}

TEST(CostModel, RefusesNonPositiveRates) {
  DevicePreset device = device_preset("h100");
  device.train_mfu = 0;
  EXPECT_THROW(CostModel(small_model(), device, ClusterShape{}), Error);
  EXPECT_THROW(device_preset("tpu"), Error);
}

TEST(CostModel, ColocatedPublishMovesWhatTheResharderPlans) {
  DevicePreset device = device_preset("h200");
  ClusterShape gather;  // train TP 4 -> rollout TP 1: each rank gathers 3/4 of the model
  gather.colocated = true;
  gather.train_tp = 4;
  gather.train_dp = 2;
  gather.instances = 8;
  const double weights = 7.6e9 * 2;
  EXPECT_NEAR(CostModel(small_model(), device, gather).publish_s(),
              0.75 * weights / device.link_bandwidth, 1e-12);
  ClusterShape split = gather;  // train TP 2 -> rollout TP 4: sliced locally
  split.train_tp = 2;
  split.train_dp = 4;
  split.rollout_tp = 4;
  split.instances = 2;
  EXPECT_EQ(CostModel(small_model(), device, split).publish_s(), 0.0);
  EXPECT_EQ(CostModel(small_model(), device, split).weight_fetch_s(), 0.0);
}

TEST(CostModel, ADeltaFetchMovesItsFractionOfTheWeightsAndTheGatherStaysWhole) {
  DevicePreset device = device_preset("h200");
  ClusterShape full;  // 8 trainer devices serving 8 instances over the network
  full.train_tp = 4;
  full.train_dp = 2;
  full.instances = 8;
  ClusterShape delta = full;
  delta.fetched_fraction = 0.1;
  const double weights = 7.6e9 * 2;
  EXPECT_NEAR(CostModel(small_model(), device, full).weight_fetch_s(),
              weights / device.network_bandwidth, 1e-9);
  EXPECT_NEAR(CostModel(small_model(), device, delta).weight_fetch_s(),
              0.1 * weights / device.network_bandwidth, 1e-9);
  EXPECT_EQ(CostModel(small_model(), device, delta).publish_s(),
            CostModel(small_model(), device, full).publish_s());
}

}  // namespace
}  // namespace aspen::sim
