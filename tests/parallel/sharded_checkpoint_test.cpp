// Sharded checkpoints: written by 2 (or 4) rank processes at TP 2 (4), loaded here at
// TP 1, 2 and 4 and exported to an HF directory - all exact.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "aspen/io/model_dir.h"
#include "aspen/model/tp_layout.h"
#include "aspen/parallel/sharded_checkpoint.h"
#include "aspen/util/error.h"
#include "run_command.h"
#include "worker/tiny_qwen.h"

namespace aspen::parallel {

using namespace aspen::io;
using namespace aspen::model;

namespace {

namespace fs = std::filesystem;
using testing::run_command;

class ShardedCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("aspen_sharded_" + std::to_string(getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void save_with_ranks(int tp, int kv_heads) {
    const auto result = run_command(std::string(ASPEN_CLI_PATH) + " launch --nproc-per-node " +
                                    std::to_string(tp) + " --master-port 0 -- " +
                                    ASPEN_DIST_WORKER_PATH + " ckpt_save " +
                                    (dir_ / "ckpt").string() + " " + std::to_string(kv_heads));
    ASSERT_EQ(result.exit_code, 0) << result.output;
  }

  void expect_loads_at(int tp, const ModelConfig& config) {
    const auto full = testing::seeded_full_weights(config);
    for (int rank = 0; rank < tp; ++rank) {
      const auto loaded = load_sharded((dir_ / "ckpt").string(), rank, tp);
      ASSERT_EQ(loaded.size(), full.size());
      for (size_t i = 0; i < full.size(); ++i) {
        const auto& [name, tensor] = full[i];
        EXPECT_EQ(loaded[i].first, name);
        EXPECT_TRUE(torch::equal(
            loaded[i].second, take_shard(tensor, qwen_shard_spec(name, config), rank, tp, name)))
            << name << " at TP rank " << rank << " of " << tp;
      }
    }
  }

  fs::path dir_;
};

TEST_F(ShardedCheckpoint, WrittenAtTp2LoadsAtTp1Tp2AndTp4) {
  const ModelConfig config = testing::tiny_tp_config(2);
  save_with_ranks(2, 2);
  EXPECT_EQ(sharded_tp_size((dir_ / "ckpt").string()), 2);
  EXPECT_TRUE(fs::exists(dir_ / "ckpt" / "tp-0-of-2.safetensors"));
  EXPECT_TRUE(fs::exists(dir_ / "ckpt" / "tp-1-of-2.safetensors"));
  expect_loads_at(1, config);
  expect_loads_at(2, config);
  expect_loads_at(4, config);
}

TEST_F(ShardedCheckpoint, ReplicatedKvHeadsAtTp4LoadAtTp1) {
  save_with_ranks(4, 1);
  expect_loads_at(1, testing::tiny_tp_config(1));
}

TEST_F(ShardedCheckpoint, MergedAtTp1ExportsToAnHfDirectoryTheModelLoads) {
  const ModelConfig config = testing::tiny_tp_config(2);
  save_with_ranks(2, 2);
  const auto merged = load_sharded((dir_ / "ckpt").string(), 0, 1);
  save_model_weights((dir_ / "hf").string(), merged);
  QwenForCausalLM model(config);
  model->load_state(load_model_weights((dir_ / "hf").string()), "exported checkpoint");
  for (const auto& [name, tensor] : testing::seeded_full_weights(config)) {
    bool found = false;
    for (const auto& [model_name, param] : model->hf_state()) {
      if (model_name != name) continue;
      found = true;
      EXPECT_TRUE(torch::equal(param, tensor)) << name;
    }
    EXPECT_TRUE(found) << name;
  }
}

TEST_F(ShardedCheckpoint, MissingShardFileIsAnErrorNamingIt) {
  save_with_ranks(2, 2);
  fs::remove(dir_ / "ckpt" / "tp-1-of-2.safetensors");
  try {
    load_sharded((dir_ / "ckpt").string(), 0, 1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tp-1-of-2.safetensors"), std::string::npos) << e.what();
  }
  // TP rank 0 of 2 needs only its own file.
  EXPECT_NO_THROW(load_sharded((dir_ / "ckpt").string(), 0, 2));
}

// Per-tensor holdings: a tensor held under its saved spec reads only the shards it
// needs, one held under another spec (or whole) is assembled and cut, a skipped one
// reads nothing. Both ranks' files are written here, in one process.
TEST_F(ShardedCheckpoint, EachTensorLoadsAsItsHoldingSays) {
  const std::string dir = (dir_ / "ckpt").string();
  const torch::Tensor rows = torch::arange(24, torch::kFloat).reshape({4, 6});  // 4 row blocks
  const torch::Tensor norm = torch::tensor({1.0f, 2.0f});
  const ShardSpec by_rows{0, 4};
  for (int rank = 0; rank < 2; ++rank) {
    save_sharded(dir,
                 {{"rows", take_shard(rows, by_rows, rank, 2, "rows"), by_rows},
                  {"norm", norm, ShardSpec{}}},
                 rank, 2);
  }
  const ShardSpec by_columns{1, 3};
  const auto loaded = load_sharded(
      dir, [&](const std::string& name, const ShardSpec& saved) -> std::optional<ShardHolding> {
        EXPECT_EQ(saved, name == "rows" ? by_rows : ShardSpec{}) << name;
        if (name == "rows") return ShardHolding{by_columns, 2, 3};  // split another way
        return ShardHolding{};                                       // whole
      });
  ASSERT_EQ(loaded.size(), 2u);
  EXPECT_TRUE(torch::equal(loaded[0].second, rows.narrow(1, 4, 2)));
  EXPECT_TRUE(torch::equal(loaded[1].second, norm));
  const auto whole = load_sharded(dir, [](const std::string&, const ShardSpec&) {
    return std::optional<ShardHolding>(ShardHolding{});
  });
  EXPECT_TRUE(torch::equal(whole[0].second, rows));

  // Rank 0's own rows need only its file; skipping "norm" too leaves rank 1's unread.
  fs::remove(dir_ / "ckpt" / "tp-1-of-2.safetensors");
  const auto own = load_sharded(dir, [&](const std::string& name, const ShardSpec& saved) {
    return name == "rows" ? std::optional<ShardHolding>(ShardHolding{saved, 0, 2}) : std::nullopt;
  });
  ASSERT_EQ(own.size(), 1u);
  EXPECT_TRUE(torch::equal(own[0].second, rows.narrow(0, 0, 2)));
  EXPECT_THROW(load_sharded(dir, [](const std::string&, const ShardSpec&) {
                 return std::optional<ShardHolding>(ShardHolding{});
               }),
               Error);
}

TEST_F(ShardedCheckpoint, NotACheckpointOrMalformedLayoutIsAnError) {
  fs::create_directories(dir_ / "ckpt");
  EXPECT_THROW(load_sharded((dir_ / "ckpt").string(), 0, 1), Error);
  std::ofstream(dir_ / "ckpt" / "layout.json") << "{\"format\": \"other\"}";
  try {
    load_sharded((dir_ / "ckpt").string(), 0, 1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layout.json"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace aspen::parallel
