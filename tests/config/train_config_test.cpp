#include "aspen/config/train_config.h"

#include <gtest/gtest.h>

#include "aspen/config/pipeline_parallel_checks.h"

namespace aspen::config {
namespace {

TEST(TrainConfig, EmptyConfigIsTheBuiltInDemo) {
  Config config = Config::empty();
  const TrainConfig parsed = parse_train_config(config);
  EXPECT_TRUE(parsed.model.path.empty());
  EXPECT_EQ(parsed.data.task, TaskKind::kArithmetic);
  EXPECT_EQ(parsed.algorithm.name, AlgorithmName::kGrpo);
  EXPECT_EQ(parsed.pipeline.mode, PipelineMode::kSync);
}

TEST(TrainConfig, DapoTurnsOnItsPublishedDefaults) {
  Config config = Config::parse("algorithm:\n  name: dapo\n", "run.yaml");
  const TrainConfig parsed = parse_train_config(config);
  EXPECT_DOUBLE_EQ(parsed.algorithm.clip_ratio_high, 0.28);
  EXPECT_TRUE(parsed.algorithm.dynamic_sampling);
}

void expect_error_at(const std::string& yaml, const std::string& input) {
  Config config = Config::parse(yaml, "run.yaml");
  try {
    parse_train_config(config);
    FAIL() << "expected an error for " << yaml;
  } catch (const Error& e) {
    EXPECT_EQ(e.input(), input) << e.what();
  }
}

TEST(TrainConfig, ErrorsNameTheKeyPath) {
  expect_error_at("train:\n  lrr: 1\n", "run.yaml: train.lrr");
  expect_error_at("rollout:\n  n: many\n", "run.yaml: rollout.n");
  expect_error_at("algorithm:\n  name: ppo2\n", "run.yaml: algorithm.name");
  expect_error_at("rollout:\n  temperature: 0\n", "run.yaml: rollout.temperature");
  expect_error_at("unknown_section: {}\n", "run.yaml: unknown_section");
  expect_error_at("data:\n  task: jsonl\n", "run.yaml: data.path");
  expect_error_at("checkpoint:\n  every: -1\n", "run.yaml: checkpoint.every");
  expect_error_at("pipeline:\n  rollout_cores: [0, x]\n", "run.yaml: pipeline.rollout_cores");
  expect_error_at("algorithm:\n  off_policy: tis\n", "run.yaml: algorithm.off_policy_cap");
  expect_error_at("algorithm:\n  kl_ctrl: pid\n", "run.yaml: algorithm.kl_ctrl");
  expect_error_at("placement:\n  mode: shared\n", "run.yaml: placement.mode");
  expect_error_at("train:\n  device: gpu\n", "run.yaml: train.device");
  expect_error_at("rollout:\n  device: cuda:x\n", "run.yaml: rollout.device");
  expect_error_at("placement:\n  train: {dp: 0}\n", "run.yaml: placement.train.dp");
  expect_error_at("placement:\n  train: {tp: 2}\n", "run.yaml: placement");  // 2 vs 1 rollout rank
  expect_error_at("placement:\n  mode: disaggregated\n  swap: true\n", "run.yaml: placement.swap");
  expect_error_at("pipeline:\n  mode: async\nplacement:\n  swap: true\n",
                  "run.yaml: placement.swap");
  expect_error_at("pipeline:\n  mode: fast\n", "run.yaml: pipeline.mode");
  expect_error_at("pipeline:\n  on_instance_failure: retry\n",
                  "run.yaml: pipeline.on_instance_failure");
  // Sync is eta 0 whatever max_staleness says: weights must reach the rollout each update.
  expect_error_at("pipeline:\n  sync_every: 2\n", "run.yaml: pipeline.sync_every");
}

TEST(TrainConfig, NonsensicalValuesAreErrorsNamingTheKey) {
  expect_error_at("train:\n  lr: .inf\n", "run.yaml: train.lr");
  expect_error_at("algorithm:\n  kl_coef: -0.1\n", "run.yaml: algorithm.kl_coef");
  expect_error_at("algorithm:\n  entropy_coef: -1\n", "run.yaml: algorithm.entropy_coef");
  expect_error_at("train:\n  mini_batch_size: -8\n", "run.yaml: train.mini_batch_size");
  expect_error_at("train:\n  sft_steps: -1\n", "run.yaml: train.sft_steps");
  expect_error_at("train:\n  micro_batch_tokens: 0\n", "run.yaml: train.micro_batch_tokens");
  expect_error_at("logging:\n  eval_every: -5\n", "run.yaml: logging.eval_every");
  expect_error_at("rollout:\n  max_num_seqs: 0\n", "run.yaml: rollout.max_num_seqs");
  expect_error_at("rollout:\n  top_p: 1.5\n", "run.yaml: rollout.top_p");
  expect_error_at("pipeline:\n  rollout_cores: [100000]\n", "run.yaml: pipeline.rollout_cores");
  expect_error_at("model:\n  hidden_size: -128\n", "run.yaml: model.hidden_size");
  // Absurd but parseable: errors, not hangs or terabyte allocations.
  expect_error_at("data:\n  train_size: 100000000\n", "run.yaml: data.train_size");
  expect_error_at("pipeline:\n  threads: 1000\n", "run.yaml: pipeline.threads");
  expect_error_at("pipeline:\n  mode: async\n  max_staleness: 1000000\n",
                  "run.yaml: pipeline.max_staleness");
  expect_error_at("model:\n  hidden_size: 1000000000\n", "run.yaml: model.hidden_size");
}

TEST(TrainConfig, PipelineEnumsAreParsedOnceAndWrittenBackAsSpelled) {
  Config config = Config::parse(
      "pipeline:\n  mode: async\n  on_instance_failure: stop\nalgorithm:\n  name: dapo\n",
      "run.yaml");
  const TrainConfig parsed = parse_train_config(config);
  EXPECT_EQ(parsed.pipeline.mode, PipelineMode::kAsync);
  EXPECT_EQ(parsed.pipeline.on_instance_failure, InstanceFailurePolicy::kStop);
  EXPECT_TRUE(parsed.algorithm.dynamic_sampling);  // with async too: a batch rule now
  const nlohmann::json json = parsed.as_json();
  EXPECT_EQ(json["pipeline"]["mode"], "async");
  EXPECT_EQ(json["pipeline"]["on_instance_failure"], "stop");
}

// pipeline.dispatch_chunk's `auto`: halves of groups in async with several instances,
// whole groups for one instance or in sync (the baseline), written back as spelled.
TEST(TrainConfig, AutoDispatchChunkSplitsGroupsInHalfOnlyForAsyncOverSeveralInstances) {
  const auto parsed = [](const std::string& text) {
    Config config = Config::parse(text, "run.yaml");
    return parse_train_config(config);
  };
  const TrainConfig async8 = parsed("pipeline:\n  mode: async\nrollout:\n  n: 8\n");
  EXPECT_EQ(async8.pipeline.dispatch_chunk, kDispatchChunkAuto);
  EXPECT_EQ(async8.as_json()["pipeline"]["dispatch_chunk"], "auto");
  EXPECT_EQ(dispatch_chunk(async8, 2), 4);
  EXPECT_EQ(dispatch_chunk(async8, 16), 4);
  EXPECT_EQ(dispatch_chunk(async8, 1), 8);
  EXPECT_EQ(dispatch_chunk(parsed("pipeline:\n  mode: async\nrollout:\n  n: 6\n"), 2), 3);
  // No divisor between n / 2 and n: the whole group.
  EXPECT_EQ(dispatch_chunk(parsed("pipeline:\n  mode: async\nrollout:\n  n: 9\n"), 2), 9);
  EXPECT_EQ(dispatch_chunk(parsed("pipeline:\n  mode: sync\nrollout:\n  n: 8\n"), 2), 8);
  const TrainConfig whole =
      parsed("pipeline:\n  mode: async\n  dispatch_chunk: 0\nrollout:\n  n: 8\n");
  EXPECT_EQ(dispatch_chunk(whole, 2), 8);
  EXPECT_EQ(whole.as_json()["pipeline"]["dispatch_chunk"], 0);
  EXPECT_EQ(dispatch_chunk(parsed("pipeline:\n  dispatch_chunk: 2\nrollout:\n  n: 8\n"), 1), 2);
  EXPECT_THROW(parsed("pipeline:\n  dispatch_chunk: half\n"), Error);
  EXPECT_THROW(parsed("pipeline:\n  dispatch_chunk: -2\n"), Error);
}

// The config's field table is the one place these spellings live (verl's, for the
// algorithm's): every one parses to its value, anything else names the key.
TEST(TrainConfig, EnumSpellingsParseToTheirValuesAndOthersNameTheKey) {
  const auto parsed = [](const std::string& yaml) {
    Config config = Config::parse(yaml, "run.yaml");
    return parse_train_config(config);
  };
  const std::vector<std::pair<std::string, KlEstimator>> kl = {
      {"kl", KlEstimator::kK1},  {"k1", KlEstimator::kK1},         {"abs", KlEstimator::kAbs},
      {"mse", KlEstimator::kK2}, {"k2", KlEstimator::kK2},         {"low_var_kl", KlEstimator::kK3},
      {"k3", KlEstimator::kK3}};
  for (const auto& [spelling, value] : kl) {
    EXPECT_EQ(parsed("algorithm:\n  kl_estimator: " + spelling + "\n").algorithm.kl_estimator,
              value)
        << spelling;
  }
  for (AggMode m : {AggMode::kTokenMean, AggMode::kSeqMeanTokenMean, AggMode::kSeqMeanTokenSum,
                    AggMode::kSeqMeanTokenSumNorm}) {
    const std::string yaml = "algorithm:\n  loss_agg: " + std::string(name_of(m)) + "\n";
    EXPECT_EQ(parsed(yaml).algorithm.loss_agg, m) << name_of(m);
  }
  EXPECT_EQ(parsed("train:\n  schedule: cosine\n").train.schedule, LrScheduleKind::kCosine);
  for (DispatchPolicyKind kind : {DispatchPolicyKind::kRoundRobin,
                                  DispatchPolicyKind::kLeastRequests,
                                  DispatchPolicyKind::kQueueAware}) {
    const std::string yaml = std::string("pipeline:\n  dispatch: ") + name_of(kind) + "\n";
    EXPECT_EQ(parsed(yaml).pipeline.dispatch, kind) << name_of(kind);
  }
  expect_error_at("algorithm:\n  kl_estimator: full\n", "run.yaml: algorithm.kl_estimator");
  expect_error_at("algorithm:\n  loss_agg: mean\n", "run.yaml: algorithm.loss_agg");
  expect_error_at("train:\n  schedule: linear\n", "run.yaml: train.schedule");
  expect_error_at("pipeline:\n  dispatch: fastest\n", "run.yaml: pipeline.dispatch");
  expect_error_at("pipeline:\n  dispatch: Round_Robin\n", "run.yaml: pipeline.dispatch");
}

TEST(TrainConfig, DevicesAreParsedOnceAndWrittenBackAsTheyWereSpelled) {
  Config config = Config::parse("train:\n  device: cuda:1\nrollout:\n  device: cuda\n", "run.yaml");
  const TrainConfig parsed = parse_train_config(config);
  EXPECT_EQ(parsed.train.device, (DeviceSpec{true, 1}));
  EXPECT_EQ(parsed.rollout.device, (DeviceSpec{true, std::nullopt}));
  EXPECT_EQ(parsed.as_json()["train"]["device"], "cuda:1");
  EXPECT_EQ(parsed.as_json()["rollout"]["device"], "cuda");
  Config empty = Config::empty();
  EXPECT_EQ(parse_train_config(empty).train.device, DeviceSpec{});
}

TEST(TrainConfig, PlacementGrid) {
  Config config = Config::parse(
      "placement: {mode: disaggregated, train: {dp: 2, tp: 2}, rollout: {instances: 2, tp: 1}}\n",
      "run.yaml");
  const Placement placement = parse_train_config(config).placement;
  EXPECT_EQ(placement.world_size(), 6);
  EXPECT_EQ(placement.train_tp, 2);
  EXPECT_EQ(placement.rollout_instances, 2);
}

TEST(TrainConfig, PipelineStagesCountInTheGrid) {
  Config config = Config::parse(
      "placement: {mode: disaggregated, train: {pp: 3}, rollout: {instances: 2, tp: 2}}\n",
      "run.yaml");
  const Placement placement = parse_train_config(config).placement;
  EXPECT_EQ(placement.train_pp, 3);
  EXPECT_EQ(placement.world_size(), 7);
  EXPECT_EQ(roles_of(placement, 2).train_pp_rank, 2);
  EXPECT_TRUE(roles_of(placement, 3).serves_rollout);
  expect_error_at("placement: {train: {pp: 0}}\n", "run.yaml: placement.train.pp");
  // The simulator models PP with TP: the config takes it.
  Config grid = Config::parse("placement: {train: {pp: 2, tp: 2}, rollout: {instances: 4}}\n",
                              "run.yaml");
  EXPECT_EQ(parse_train_config(grid).placement.world_size(), 4);
}

// What aspen train cannot run on stages yet: refused naming placement.train.pp and the
// other key.
TEST(TrainConfig, TrainerPipelineRefusesWhatStagesDoNotRunYetNamingBothKeys) {
  const auto refused = [](const std::string& yaml, int64_t layers, const std::string& other) {
    Config config = Config::parse(yaml, "run.yaml");
    const TrainConfig parsed = parse_train_config(config);
    try {
      check_trainer_pipeline(parsed, layers);
      ADD_FAILURE() << "expected an error for " << yaml;
    } catch (const Error& e) {
      EXPECT_NE(e.input().find("placement.train.pp"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(other), std::string::npos) << e.what();
    }
  };
  const std::string pp2 = "placement: {train: {pp: 2}, rollout: {instances: 2}}\n";
  Config fine = Config::parse(pp2, "run.yaml");
  EXPECT_NO_THROW(check_trainer_pipeline(parse_train_config(fine), 2));
  // DP x PP and PP x TP train (and checkpoint).
  Config grid = Config::parse(
      "placement: {train: {dp: 2, pp: 2, tp: 2}, rollout: {instances: 8}}\n", "run.yaml");
  EXPECT_NO_THROW(check_trainer_pipeline(parse_train_config(grid), 2));
  // PP x EP inside DP trains; EP over a stage's TP group, and a critic on EP stages, not.
  Config experts = Config::parse(
      "placement: {train: {dp: 2, pp: 2, ep: 2}, rollout: {instances: 4}}\n", "run.yaml");
  EXPECT_NO_THROW(check_trainer_pipeline(parse_train_config(experts), 2));
  refused("placement: {train: {pp: 2, tp: 2, ep: 2}, rollout: {instances: 4}}\n", 4,
          "placement.train.ep");
  refused("algorithm: {name: ppo}\nplacement: {train: {dp: 2, pp: 2, ep: 2}, rollout: "
          "{instances: 4}}\n",
          4, "algorithm.name");
  // Colocated tensor-parallel instances take their shards of every stage's layers
  // (the resharder's stage exchange).
  Config rollout_tp = Config::parse(
      "placement: {train: {pp: 2}, rollout: {instances: 1, tp: 2}}\n", "run.yaml");
  EXPECT_NO_THROW(check_trainer_pipeline(parse_train_config(rollout_tp), 2));
  refused("algorithm: {name: ppo}\nplacement: {train: {pp: 2, tp: 2}, rollout: {instances: 4}}\n",
          4, "algorithm.name");
  refused("train: {lora: {rank: 4}}\n" + pp2, 4, "train.lora.rank");
  refused(pp2, 1, "decoder layers");  // one layer cannot make two stages
}

// config.json (as_json) is what --resume reads back: every key must round-trip.
TEST(TrainConfig, AsJsonRoundTripsEveryKey) {
  Config config = Config::parse(
      "algorithm: {name: ppo, kl_in_reward: true, kl_ctrl: adaptive, lambda: 0.95}\n"
      "train: {lr: 3.0e-5, critic_lr: 2.0e-4, schedule: cosine, warmup_steps: 3}\n"
      "pipeline: {trainer_cores: [1], rollout_cores: [0], max_staleness: 2}\n"
      "checkpoint: {every: 5, keep_last: 1}\n"
      "logging: {trace: t.json, tensorboard: true}\n"
      "placement: {mode: colocated, train: {dp: 2, tp: 1}, rollout: {instances: 1, tp: 2}}\n"
      "data: {task: countdown, task_options: {}}\n",
      "run.yaml");
  const nlohmann::json first = parse_train_config(config).as_json();
  Config reread = Config::parse(first.dump(), "config.json");
  EXPECT_EQ(parse_train_config(reread).as_json(), first);
  EXPECT_TRUE(parse_train_config(reread).logging.tensorboard);
}

TEST(TrainConfig, OverridesApplyBeforeParsing) {
  Config config = Config::empty();
  config.apply_override("rollout.n=4");
  config.apply_override("algorithm.name=rloo");
  const TrainConfig parsed = parse_train_config(config);
  EXPECT_EQ(parsed.rollout.n, 4);
  EXPECT_EQ(parsed.algorithm.name, AlgorithmName::kRloo);
}

}  // namespace
}  // namespace aspen::config
