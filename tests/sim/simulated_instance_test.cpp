// SimulatedInstance against the scheduler it models: hand-traced step counts and
// scheduled tokens, the max_num_seqs limit, preemption, and the real RolloutEngine's own
// counters on the same work.
#include <gtest/gtest.h>

#include <algorithm>

#include "aspen/model/weights_init.h"
#include "aspen/pipeline/rl_setup.h"
#include "aspen/rollout/engine.h"
#include "aspen/sim/simulated_instance.h"

namespace aspen::sim {
namespace {

// One second per engine step, nothing else, and a KV cache of `kv_tokens` tokens.
CostModel step_counting_costs(int64_t kv_tokens) {
  ModelCost model;
  model.layers = 1;
  model.hidden = 8;
  model.kv_elements_per_token = 0.5;  // one byte per token
  DevicePreset device = device_preset("cpu");
  device.roofline = false;
  device.step_overhead_s = 1.0;
  device.token_overhead_s = 0.0;
  device.memory_bytes = static_cast<double>(kv_tokens);
  ClusterShape cluster;
  cluster.memory_utilization = 1.0;
  return CostModel(model, device, cluster);
}

// Runs segments until idle; returns the finished units in order.
std::vector<SimulatedUnitDone> drain(SimulatedInstance& instance, double& now) {
  std::vector<SimulatedUnitDone> done;
  while (!instance.idle()) {
    now += instance.start_segment(now);
    for (SimulatedUnitDone& unit : instance.finish_segment()) done.push_back(unit);
  }
  return done;
}

TEST(SimulatedInstance, AGroupIsOnePrefillStepThenDecodesUntilItsLongestSample) {
  const CostModel costs = step_counting_costs(1 << 20);
  SimulatedInstance instance(costs, 64, 1024);
  instance.add_unit(5, 10, {3, 5, 5, 7}, 2);
  double now = 0;
  const std::vector<SimulatedUnitDone> done = drain(instance, now);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].unit, 5);
  EXPECT_EQ(done[0].version, 2);
  EXPECT_EQ(done[0].lengths, (std::vector<int64_t>{3, 5, 5, 7}));
  // The prompt once (every sample's first token comes with it), then 6 decode steps.
  EXPECT_EQ(instance.counters().steps, 7);
  EXPECT_EQ(now, 7.0);
  EXPECT_EQ(instance.counters().scheduled_tokens, 10 + 2 + 4 + 4 + 6);
  EXPECT_EQ(instance.queue_state().free_blocks, instance.queue_state().total_blocks);
}

TEST(SimulatedInstance, WaitingSamplesJoinWhenARunningOneLeaves) {
  const CostModel costs = step_counting_costs(1 << 20);
  SimulatedInstance instance(costs, 2, 1024);
  instance.add_unit(1, 4, {2, 9}, 0);
  instance.add_unit(2, 4, {2, 2}, 0);
  EXPECT_EQ(instance.queue_state().waiting, 4);
  double now = 0;
  const std::vector<SimulatedUnitDone> done = drain(instance, now);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].unit, 2);  // its samples are short: it finishes first
  EXPECT_EQ(done[1].unit, 1);
  EXPECT_EQ(instance.counters().preemptions, 0);
}

TEST(SimulatedInstance, AFullKvCachePreemptsTheNewestSequenceWhichRecomputes) {
  // 40 tokens of KV: a 10-token prompt and four samples of 12 cannot all fit.
  const CostModel costs = step_counting_costs(40);
  SimulatedInstance instance(costs, 64, 1024);
  instance.add_unit(1, 10, {12, 12, 12, 12}, 0);
  double now = 0;
  const std::vector<SimulatedUnitDone> done = drain(instance, now);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].lengths, (std::vector<int64_t>{12, 12, 12, 12}));
  EXPECT_GT(instance.counters().preemptions, 0);
  // Recomputation costs tokens beyond the prompt and the 4 x 11 decodes.
  EXPECT_GT(instance.counters().scheduled_tokens, 10 + 4 * 11);
}

TEST(SimulatedInstance, CuttingASegmentEndsItAtTheStepInFlight) {
  const CostModel costs = step_counting_costs(1 << 20);
  SimulatedInstance instance(costs, 64, 1024);
  instance.add_unit(1, 4, {50}, 0);
  double now = instance.start_segment(0.0);  // the prefill step
  instance.finish_segment();
  EXPECT_EQ(instance.start_segment(now), 49.0);
  EXPECT_EQ(instance.cut_segment(now + 10.5), now + 11.0);  // step 11 was running
  instance.finish_segment();
  EXPECT_EQ(instance.counters().steps, 12);
}

TEST(SimulatedInstance, TakingAUnitOutGivesEachSamplesTokensAndFreesItsKv) {
  const CostModel costs = step_counting_costs(1 << 20);
  SimulatedInstance instance(costs, 64, 1024);
  instance.add_unit(7, 4, {5, 10}, 1);
  instance.add_unit(8, 4, {30, 30}, 3);
  double now = instance.start_segment(0.0);  // both prompts, one step
  instance.finish_segment();
  now += instance.start_segment(now);  // decodes until sample 0 of unit 7 is done: 4 steps
  instance.finish_segment();
  // The rule sees each unit's version and its longest unfinished sample (5 tokens here).
  EXPECT_TRUE(instance.take_units([](int64_t, int64_t version, int64_t longest) {
                        return version < 2 && longest > 5;
                      }).empty());
  const std::vector<SimulatedUnitProgress> taken =
      instance.take_units([](int64_t, int64_t version, int64_t longest) {
        return version < 2 && longest == 5;
      });
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].unit, 7);
  EXPECT_EQ(taken[0].version, 1);
  EXPECT_EQ(taken[0].generated, (std::vector<int64_t>{5, 5}));
  // Unit 8 alone holds KV: its prompt and its two samples' 5 tokens each.
  EXPECT_EQ(instance.queue_state().total_blocks - instance.queue_state().free_blocks, 4 + 2 * 5);
  EXPECT_EQ(instance.queue_state().running, 2);
}

TEST(SimulatedInstance, AResumedUnitPrefillsPromptAndTokensThenDecodesTheRest) {
  const CostModel costs = step_counting_costs(1 << 20);
  SimulatedInstance instance(costs, 64, 1024);
  instance.resume_unit(7, 4, {5, 10}, {5, 5}, 1);  // sample 0 finished before the cut
  EXPECT_EQ(instance.queue_state().waiting, 1);
  double now = 0;
  const std::vector<SimulatedUnitDone> done = drain(instance, now);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].lengths, (std::vector<int64_t>{5, 10}));
  EXPECT_EQ(done[0].version, 1);  // the oldest token's
  // One step prefills prompt + 5 tokens and samples the 6th; 4 decodes make 10.
  EXPECT_EQ(instance.counters().steps, 5);
  EXPECT_EQ(instance.counters().scheduled_tokens, 4 + 5 + 4);
}

TEST(SimulatedInstance, RecomputingOnNewWeightsPrefillsEveryRunningSequenceAgain) {
  const CostModel costs = step_counting_costs(1 << 20);
  SimulatedInstance instance(costs, 64, 1024);
  instance.add_unit(1, 4, {10, 10}, 0);
  const double start = instance.start_segment(0.0);
  instance.finish_segment();
  instance.start_segment(start);  // 9 decode steps: cut in the third
  double now = instance.cut_segment(start + 2.5);
  instance.finish_segment();  // samples at 1 + 3 = 4 tokens
  const int64_t before = instance.counters().scheduled_tokens;
  instance.recompute_running();
  EXPECT_EQ(instance.counters().preemptions, 0);  // not a memory preemption
  now = instance.start_segment(now);
  instance.finish_segment();
  // Each sample recomputes its 4 tokens and samples its 5th in that step; the prompt
  // once: the first to rejoin recomputes it and its sibling shares it.
  EXPECT_EQ(instance.counters().scheduled_tokens - before, (4 + 4) + 4);
  double t = 0;
  const std::vector<SimulatedUnitDone> done = drain(instance, t);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].lengths, (std::vector<int64_t>{10, 10}));
}

TEST(SimulatedInstance, AToolCallFreesTheSlotKeepsTheKvAndPrefillsOnlyTheObservation) {
  const CostModel costs = step_counting_costs(1 << 20);
  ToolModel tools;
  tools.turns = 2;
  tools.latency_median_s = 10.0;
  tools.latency_sigma = 0.0;
  tools.observation_tokens = 3;
  SimulatedInstance instance(costs, 64, 1024, &tools);
  instance.add_unit(1, 4, {6}, 0);  // turns end at 3 and 6 tokens
  double now = 0;
  std::vector<SimulatedUnitDone> done;
  while (!instance.idle()) {
    const double step = instance.start_segment(now);
    if (step == 0) {  // nothing to run: the tool call returns then
      now = instance.next_tool_return();
      continue;
    }
    now += step;
    for (SimulatedUnitDone& unit : instance.finish_segment()) done.push_back(unit);
    if (now == 3.0) {
      // Out on its call since its third token: no KV freed (prompt 4 + 3 tokens).
      EXPECT_EQ(instance.next_tool_return(), 13.0);
      EXPECT_EQ(instance.queue_state().total_blocks - instance.queue_state().free_blocks, 4 + 3);
      EXPECT_EQ(instance.queue_state().running, 1);  // its load still counts
    }
  }
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].lengths, (std::vector<int64_t>{6}));
  // Prompt, 2 decodes to the turn's end, 10 s of tool, the observation's 3 tokens (and
  // the 4th model token), 2 decodes.
  EXPECT_EQ(instance.counters().steps, 6);
  EXPECT_EQ(instance.counters().scheduled_tokens, 4 + 2 + 3 + 2);
  EXPECT_EQ(now, 16.0);
  EXPECT_EQ(instance.counters().tool_calls, 1);
  EXPECT_EQ(instance.counters().tool_wait_seconds, 10.0);
}

TEST(SimulatedInstance, RefusesAPromptLargerThanTheKvCache) {
  const CostModel costs = step_counting_costs(16);
  SimulatedInstance instance(costs, 64, 1024);
  EXPECT_THROW(instance.add_unit(1, 16, {1}, 0), Error);
}

// A real engine of a one-layer random model the models below are compared with: 8
// sequences, 64 tokens a step (the instance models' max_num_seqs and budget), a KV
// cache that never fills.
RolloutEngine one_layer_engine() {
  ModelSection section;
  section.num_layers = 1;
  EngineConfig engine_config;
  engine_config.max_num_seqs = 8;
  engine_config.max_num_batched_tokens = 64;
  engine_config.kv_cache_bytes = 8 << 20;
  return RolloutEngine(make_random_model(builtin_model_config(section, 64), 3), engine_config);
}

// The real engine on the same work: groups forced to exact lengths (min_tokens =
// max_tokens), prompts within one step's budget.
TEST(SimulatedInstance, CountsTheSameStepsAndTokensAsTheRealEngine) {
  RolloutEngine engine = one_layer_engine();
  struct Group {
    int64_t prompt, n, length;
  };
  const std::vector<Group> groups = {{10, 4, 6}, {7, 2, 9}, {12, 4, 3}};
  const CostModel costs = step_counting_costs(1 << 20);
  SimulatedInstance instance(costs, 8, 64);
  for (size_t g = 0; g < groups.size(); ++g) {
    GenerationRequest request;
    request.id = std::to_string(g);
    for (int64_t t = 0; t < groups[g].prompt; ++t) request.prompt.push_back(3 + t + 20 * g);
    request.n = groups[g].n;
    request.params.max_tokens = request.params.min_tokens = groups[g].length;
    request.params.seed = g;
    engine.add_request(request);
    instance.add_unit(static_cast<int64_t>(g), groups[g].prompt,
                      std::vector<int64_t>(static_cast<size_t>(groups[g].n), groups[g].length), 0);
  }
  while (engine.has_unfinished()) engine.step();
  double now = 0;
  drain(instance, now);
  EXPECT_EQ(instance.counters().steps, engine.stats().steps);
  EXPECT_EQ(instance.counters().scheduled_tokens, engine.stats().scheduled_tokens);
}

// Partial rollouts on the real engine and on the model: a group cut after a few steps
// (rollout_worker.h "partial") and resumed on another engine, each unfinished sample as
// a request of its own continuing its output. Both engines count the same steps and
// scheduled tokens as the two instance models.
TEST(SimulatedInstance, CutsAndResumesLikeTheRealEngine) {
  const CostModel costs = step_counting_costs(1 << 20);
  const int64_t prompt_tokens = 10;
  const std::vector<int64_t> lengths = {4, 12, 9};
  RolloutEngine first = one_layer_engine();
  GenerationRequest request;
  request.id = "g";
  for (int64_t t = 0; t < prompt_tokens; ++t) request.prompt.push_back(3 + t);
  request.n = 1;
  std::vector<GenerationRequest> samples;  // one per sample: each its own length
  for (size_t i = 0; i < lengths.size(); ++i) {
    GenerationRequest sample = request;
    sample.id = "g" + std::to_string(i);
    sample.params.max_tokens = sample.params.min_tokens = lengths[i];
    sample.params.seed = 7;
    sample.sample_indices = {static_cast<int64_t>(i)};
    first.add_request(sample);
    samples.push_back(sample);
  }
  SimulatedInstance cut_from(costs, 8, 64);
  // The model's unit of three separate one-sample requests: three units here.
  for (size_t i = 0; i < lengths.size(); ++i) {
    cut_from.add_unit(static_cast<int64_t>(i), prompt_tokens, {lengths[i]}, 0);
  }
  // Six steps: the prompts, then five decodes (sample 0 finishes at its 4th token).
  for (int s = 0; s < 6; ++s) first.step();
  double now = 0;
  while (cut_from.counters().steps < 6) {
    const double start = now;
    now += cut_from.start_segment(now);
    if (cut_from.counters().steps + 1 < 6) now = cut_from.cut_segment(start + (5.5 - cut_from.counters().steps));
    cut_from.finish_segment();
  }
  EXPECT_EQ(cut_from.counters().steps, first.stats().steps);
  EXPECT_EQ(cut_from.counters().scheduled_tokens, first.stats().scheduled_tokens);
  std::vector<Completion> cut;
  for (size_t i = 1; i < lengths.size(); ++i) {
    for (Completion& c : first.cut_request("g" + std::to_string(i))) cut.push_back(std::move(c));
  }
  ASSERT_EQ(cut.size(), 2u);
  const std::vector<SimulatedUnitProgress> taken =
      cut_from.take_units([](int64_t, int64_t, int64_t) { return true; });
  ASSERT_EQ(taken.size(), 2u);
  // Resumed elsewhere: the real engine continues each output; the model resumes the units.
  RolloutEngine second = one_layer_engine();
  SimulatedInstance resumed_on(costs, 8, 64);
  for (size_t k = 0; k < cut.size(); ++k) {
    GenerationRequest resumed = samples[static_cast<size_t>(cut[k].sample_index)];
    resumed.resume_from.tokens = cut[k].token_ids;
    resumed.resume_from.logprobs = cut[k].logprobs;
    resumed.resume_from.policy_versions = cut[k].policy_versions;
    second.add_request(resumed);
    EXPECT_EQ(taken[k].generated, (std::vector<int64_t>{static_cast<int64_t>(cut[k].token_ids.size())}));
    resumed_on.resume_unit(taken[k].unit, prompt_tokens,
                           {lengths[static_cast<size_t>(cut[k].sample_index)]},
                           taken[k].generated, taken[k].version);
  }
  while (second.has_unfinished()) second.step();
  double later = 0;
  drain(resumed_on, later);
  EXPECT_EQ(resumed_on.counters().steps, second.stats().steps);
  EXPECT_EQ(resumed_on.counters().scheduled_tokens, second.stats().scheduled_tokens);
}

}  // namespace
}  // namespace aspen::sim
