#include "aspen/parallel/dist_env.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "aspen/util/error.h"

namespace aspen::parallel {
namespace {

EnvLookup lookup_from(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

std::string error_of(const std::map<std::string, std::string>& vars) {
  try {
    read_dist_env(lookup_from(vars));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DistEnv, ReadsTorchrunVariables) {
  const DistEnv env = read_dist_env(lookup_from({{"RANK", "3"},
                                                 {"WORLD_SIZE", "4"},
                                                 {"LOCAL_RANK", "1"},
                                                 {"MASTER_ADDR", "10.0.0.2"},
                                                 {"MASTER_PORT", "1234"},
                                                 {"ASPEN_RDZV_TIMEOUT_S", "2.5"},
                                                 {"ASPEN_DIST_TIMEOUT_S", "7"}}));
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.master_addr, "10.0.0.2");
  EXPECT_EQ(env.master_port, 1234);
  EXPECT_EQ(env.rendezvous_timeout.count(), 2500);
  EXPECT_EQ(env.collective_timeout.count(), 7000);
}

TEST(DistEnv, DefaultsForOptionalVariables) {
  const DistEnv env = read_dist_env(lookup_from({{"RANK", "1"}, {"WORLD_SIZE", "2"}}));
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.master_addr, "127.0.0.1");
  EXPECT_EQ(env.master_port, 29500);
  EXPECT_EQ(env.collective_timeout.count(), 60000);
  EXPECT_TRUE(dist_env_present(lookup_from({{"WORLD_SIZE", "2"}})));
  EXPECT_FALSE(dist_env_present(lookup_from({})));
}

TEST(DistEnv, MalformedValuesNameTheVariable) {
  EXPECT_NE(error_of({{"WORLD_SIZE", "2"}}).find("RANK is not set"), std::string::npos);
  EXPECT_NE(error_of({{"RANK", "x"}, {"WORLD_SIZE", "2"}}).find("RANK='x' is not an integer"),
            std::string::npos);
  EXPECT_NE(error_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}}).find("RANK=2 is out of range"),
            std::string::npos);
  EXPECT_NE(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2x"}}).find("WORLD_SIZE='2x'"),
            std::string::npos);
  EXPECT_NE(error_of({{"RANK", "0"}, {"WORLD_SIZE", "0"}}).find("WORLD_SIZE=0 is out of range"),
            std::string::npos);
  EXPECT_NE(error_of({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_PORT", "70000"}})
                .find("MASTER_PORT=70000"),
            std::string::npos);
  EXPECT_NE(error_of({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "-1"}})
                .find("LOCAL_RANK=-1"),
            std::string::npos);
  EXPECT_NE(error_of({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"ASPEN_DIST_TIMEOUT_S", "0"}})
                .find("ASPEN_DIST_TIMEOUT_S='0'"),
            std::string::npos);
}

TEST(DistEnv, TorchrunAgentStoreMakesMasterAddrTheStoreOfEveryRank) {
  // torchrun's agent serves the store (TORCHELASTIC_USE_AGENT_STORE=True): every rank,
  // rank 0 included, connects to MASTER_ADDR as given, even when all ranks are local.
  std::map<std::string, std::string> vars = {{"RANK", "0"},
                                             {"WORLD_SIZE", "2"},
                                             {"LOCAL_WORLD_SIZE", "2"},
                                             {"MASTER_ADDR", "localhost"},
                                             {"MASTER_PORT", "29400"},
                                             {"TORCHELASTIC_USE_AGENT_STORE", "True"}};
  const DistEnv agent = read_dist_env(lookup_from(vars));
  EXPECT_TRUE(agent.agent_store);
  EXPECT_EQ(store_address(agent), "localhost");
  vars["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  const DistEnv own = read_dist_env(lookup_from(vars));
  EXPECT_FALSE(own.agent_store);
  EXPECT_EQ(store_address(own), "127.0.0.1");  // rank 0 serves it, on loopback
  vars["TORCHELASTIC_USE_AGENT_STORE"] = "1";
  EXPECT_NE(error_of(vars).find("TORCHELASTIC_USE_AGENT_STORE='1' is neither True nor False"),
            std::string::npos)
      << error_of(vars);
  vars["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  vars.erase("MASTER_PORT");
  EXPECT_NE(error_of(vars).find("MASTER_PORT is not set, but TORCHELASTIC_USE_AGENT_STORE=True"),
            std::string::npos)
      << error_of(vars);
}

}  // namespace
}  // namespace aspen::parallel
