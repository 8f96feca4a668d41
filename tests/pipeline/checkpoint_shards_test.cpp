// The tensor-parallel parts of a run checkpoint: a state written by two TP ranks (both
// written here, in one process) - split, replicated and whole-on-one-rank tensors, as
// EP over the TP group holds them - reads back whole, at TP 2 with every tensor split,
// and exactly as written; an incomplete set of experts files is refused naming the file.
#include "aspen/pipeline/checkpoint_shards.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "aspen/util/error.h"

namespace aspen::pipeline {
namespace {

namespace fs = std::filesystem;

// A state of four tensors: "attn" split by rows over the TP group, "norm" replicated,
// and two experts, each whole on the rank that holds it (expert i on rank i).
class CheckpointShards : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("aspen_checkpoint_shards_" + std::to_string(getpid())))
               .string();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static HoldingOf written_by(int rank) {
    return [rank](const std::string& name) -> std::optional<ShardHolding> {
      if (name == "attn") return ShardHolding{kRows, rank, 2};
      if (name == "norm") return ShardHolding{{}, rank, 2};
      if (name == "expert." + std::to_string(rank)) return ShardHolding{};  // its own, whole
      return std::nullopt;
    };
  }

  void write_both_ranks() {
    for (int rank = 0; rank < 2; ++rank) {
      const std::string expert = "expert." + std::to_string(rank);
      write_rank_shards(dir_,
                        {{"attn", take_shard(attn_, kRows, rank, 2, "attn")},
                         {"norm", norm_},
                         {expert, experts_.at(expert)}},
                        written_by(rank), rank, 2);
    }
  }

  static constexpr ShardSpec kRows{0, 4};
  std::string dir_;
  torch::Tensor attn_ = torch::arange(32, torch::kFloat).reshape({8, 4});
  torch::Tensor norm_ = torch::tensor({0.5f, 2.0f, 3.0f, 4.0f});
  std::map<std::string, torch::Tensor> experts_ = {
      {"expert.0", torch::arange(12, torch::kFloat).reshape({4, 3})},
      {"expert.1", -torch::arange(12, torch::kFloat).reshape({4, 3})}};
};

TEST_F(CheckpointShards, WrittenByTwoRanksReadsWhole) {
  write_both_ranks();
  EXPECT_TRUE(fs::exists(dir_ + "/experts-00000-of-00002.safetensors"));
  EXPECT_TRUE(fs::exists(dir_ + "/experts-00001-of-00002.safetensors"));
  const auto whole = read_rank_shards(dir_, whole_holding());
  ASSERT_EQ(whole.size(), 4u);
  EXPECT_TRUE(torch::equal(whole.at("attn"), attn_));
  EXPECT_TRUE(torch::equal(whole.at("norm"), norm_));
  for (const auto& [name, expert] : experts_) EXPECT_TRUE(torch::equal(whole.at(name), expert));
}

TEST_F(CheckpointShards, ReadsBackAsEachRankWroteIt) {
  write_both_ranks();
  for (int rank = 0; rank < 2; ++rank) {
    const auto held = read_rank_shards(dir_, written_by(rank));
    const std::string expert = "expert." + std::to_string(rank);
    ASSERT_EQ(held.size(), 3u) << "rank " << rank;
    EXPECT_TRUE(torch::equal(held.at("attn"), take_shard(attn_, kRows, rank, 2, "attn")));
    EXPECT_TRUE(torch::equal(held.at("norm"), norm_));
    EXPECT_TRUE(torch::equal(held.at(expert), experts_.at(expert)));
  }
}

// TP 2 without EP: every rank holds every expert, split by its rows; "attn" by columns.
TEST_F(CheckpointShards, ReadsAtAnotherSplitCuttingWholeTensors) {
  write_both_ranks();
  const ShardSpec columns{1, 2};
  for (int rank = 0; rank < 2; ++rank) {
    const auto held = read_rank_shards(dir_, [&](const std::string& name) {
      if (name == "norm") return std::optional<ShardHolding>(ShardHolding{{}, rank, 2});
      return std::optional<ShardHolding>(
          ShardHolding{name == "attn" ? columns : ShardSpec{0, 2}, rank, 2});
    });
    ASSERT_EQ(held.size(), 4u);
    EXPECT_TRUE(torch::equal(held.at("attn"), attn_.narrow(1, 2 * rank, 2)));
    for (const auto& [name, expert] : experts_) {
      EXPECT_TRUE(torch::equal(held.at(name), expert.narrow(0, 2 * rank, 2))) << name;
    }
  }
  // Whole tensors of a checkpoint written without TP are cut the same way.
  const auto cut = as_held({{"expert.1", experts_.at("expert.1")}, {"unheld", norm_}},
                           [](const std::string& name) {
                             return name == "expert.1" ? std::optional<ShardHolding>(
                                                             ShardHolding{{0, 2}, 1, 2})
                                                       : std::nullopt;
                           },
                           "whole state");
  ASSERT_EQ(cut.size(), 1u);
  EXPECT_TRUE(torch::equal(cut.at("expert.1"), experts_.at("expert.1").narrow(0, 2, 2)));
}

TEST_F(CheckpointShards, MissingExpertsFileIsRefusedNamingIt) {
  write_both_ranks();
  fs::remove(dir_ + "/experts-00001-of-00002.safetensors");
  try {
    read_rank_shards(dir_, written_by(0));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("experts-00001-of-00002.safetensors"), std::string::npos)
        << e.what();
  }
}

TEST_F(CheckpointShards, ATensorWithoutHoldingIsRefusedNamingIt) {
  try {
    write_rank_shards(dir_, {{"stray", norm_}}, written_by(0), 0, 2);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stray"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace aspen::pipeline
