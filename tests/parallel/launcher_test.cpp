// `aspen launch` through the real binary: environment, exit status, teardown.
#include "aspen/parallel/launcher.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "aspen/util/error.h"
#include "parallel/binaries.h"
#include "run_command.h"
#include "spawn.h"

namespace aspen::parallel {
namespace {

using testing::run_command;

TEST(Launcher, RankEnvironmentFollowsTorchrun) {
  LaunchOptions options;
  options.nproc_per_node = 2;
  options.nnodes = 3;
  options.node_rank = 2;
  options.master_addr = "10.1.2.3";
  options.master_port = 4242;
  options.rdzv_timeout_s = 5;
  options.command = {"true"};
  const EnvVars env = rank_environment(options, 1);
  auto value = [&](const std::string& key) {
    for (const auto& [k, v] : env) {
      if (k == key) return v;
    }
    return std::string("<unset>");
  };
  EXPECT_EQ(value("RANK"), "5");
  EXPECT_EQ(value("WORLD_SIZE"), "6");
  EXPECT_EQ(value("LOCAL_RANK"), "1");
  EXPECT_EQ(value("LOCAL_WORLD_SIZE"), "2");
  EXPECT_EQ(value("MASTER_ADDR"), "10.1.2.3");
  EXPECT_EQ(value("MASTER_PORT"), "4242");
  EXPECT_EQ(value("ASPEN_RDZV_TIMEOUT_S"), "5");
}

TEST(Launcher, ValidatesOptions) {
  LaunchOptions options;
  options.command = {"true"};
  options.nnodes = 2;
  options.node_rank = 2;
  EXPECT_THROW(options.validate(), Error);
  options.node_rank = 0;
  options.master_port = 0;  // a free port cannot be shared with another node
  EXPECT_THROW(options.validate(), Error);
  options.nnodes = 1;
  EXPECT_NO_THROW(options.validate());
  options.command.clear();
  EXPECT_THROW(options.validate(), Error);
}

TEST(Launcher, AllRanksSucceedAndSeeTheirEnvironment) {
  const auto result = run_command(kAspen +
                                  " launch --nproc-per-node 3 --master-port 0 -- sh -c "
                                  "'echo \"r=$RANK w=$WORLD_SIZE l=$LOCAL_RANK a=$MASTER_ADDR\"'");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  for (int r = 0; r < 3; ++r) {
    const std::string line =
        "r=" + std::to_string(r) + " w=3 l=" + std::to_string(r) + " a=127.0.0.1";
    EXPECT_NE(result.output.find(line), std::string::npos) << result.output;
  }
}

TEST(Launcher, FailingRankStopsTheOthersAndIsNamed) {
  // Rank 1 fails at once; rank 0 would sleep 60 s unless the launcher stops it.
  const auto result = run_command(kAspen +
                                  " launch --nproc-per-node 2 --master-port 0 -- sh -c "
                                  "'if [ \"$RANK\" = 1 ]; then exit 3; fi; sleep 60'");
  EXPECT_EQ(result.exit_code, 3) << result.output;
  EXPECT_NE(result.output.find("aspen launch: rank 1 exited with code 3"), std::string::npos)
      << result.output;
  EXPECT_LT(result.seconds, 10.0);
}

TEST(Launcher, SigtermIgnoringRankIsKilledAfterTheGracePeriod) {
  const auto result =
      run_command(kAspen +
                  " launch --nproc-per-node 2 --master-port 0 --grace-period 1 -- sh -c "
                  "'if [ \"$RANK\" = 0 ]; then sleep 1; kill -9 $$; fi; trap \"\" TERM; sleep 60'");
  EXPECT_EQ(result.exit_code, 128 + 9) << result.output;
  EXPECT_GE(result.seconds, 1.9);  // 1 s + the 1 s grace period rank 1 sat out
  EXPECT_NE(result.output.find("aspen launch: rank 0 killed by signal 9"), std::string::npos)
      << result.output;
  EXPECT_LT(result.seconds, 10.0);
}

TEST(Launcher, ToleratedRankMayDieAndTheOthersFinish) {
  // Rank 2 is SIGKILLed at once; ranks 0 and 1 finish their work and the job succeeds.
  const auto result =
      run_command(kAspen +
                  " launch --nproc-per-node 3 --master-port 0 --tolerate-exit 1,2 -- sh -c "
                  "'if [ \"$RANK\" = 2 ]; then kill -9 $$; fi; sleep 1; echo done-$RANK'");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(
      result.output.find("aspen launch: rank 2 killed by signal 9 (Killed); the others go on"),
      std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("done-0"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("done-1"), std::string::npos) << result.output;
}

TEST(Launcher, ToleratedRanksStillRunningAreStoppedWhenTheOthersHaveFinished) {
  const auto result =
      run_command(kAspen +
                  " launch --nproc-per-node 2 --master-port 0 --grace-period 1 --tolerate-exit 1 "
                  "-- sh -c 'if [ \"$RANK\" = 1 ]; then sleep 60; fi'");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("every other rank has finished"), std::string::npos)
      << result.output;
  EXPECT_LT(result.seconds, 10.0);
}

TEST(Launcher, ToleratedRanksMustBeARankList) {
  const auto result =
      run_command(kAspen + " launch --nproc-per-node 2 --tolerate-exit 1,x -- true");
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.output.find("--tolerate-exit 1,x"), std::string::npos) << result.output;
}

TEST(Launcher, RanksStdoutGoesToTheGivenFile) {
  const std::string path = ::testing::TempDir() + "/aspen_launch_stdout.log";
  std::remove(path.c_str());
  LaunchOptions options;
  options.nproc_per_node = 2;
  options.master_port = 0;
  options.stdout_path = path;
  options.command = {"sh", "-c", "echo out-$RANK"};
  EXPECT_EQ(launch(options), 0);
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("out-0"), std::string::npos) << text;
  EXPECT_NE(text.find("out-1"), std::string::npos) << text;
}

TEST(Launcher, UnknownCommandFailsWith127) {
  const auto result = run_command(kAspen +
                                  " launch --nproc-per-node 1 --master-port 0 -- "
                                  "/nonexistent/aspen-no-such-command");
  EXPECT_EQ(result.exit_code, 127) << result.output;
}

TEST(Launcher, RanksDieWhenTheLauncherIsKilled) {
  // SIGKILL gives the launcher no chance to tear down; the kernel must stop its ranks.
  char dir_template[] = "/tmp/aspen_launch_pdeathsig_XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::string script = "echo $$ > " + dir + "/tmp-$RANK && mv " + dir + "/tmp-$RANK " + dir +
                             "/rank-$RANK; exec sleep 300";
  std::vector<pid_t> ranks;
  {
    testing::Spawned launcher(
        {kAspen, "launch", "--nproc-per-node", "2", "--master-port", "0", "--", "sh", "-c", script},
        dir + "/launch.log");
    const auto rank_file = [&](int r) { return dir + "/rank-" + std::to_string(r); };
    ASSERT_TRUE(testing::wait_until(
        [&] {
          return std::filesystem::exists(rank_file(0)) && std::filesystem::exists(rank_file(1));
        },
        30))
        << launcher.log();
    for (int r = 0; r < 2; ++r) ranks.push_back(std::stoi(testing::read_text(rank_file(r))));
    for (pid_t pid : ranks) ASSERT_FALSE(testing::process_gone(pid)) << "rank pid " << pid;
    ASSERT_TRUE(launcher.signal_and_reap(SIGKILL, 10));
  }
  const bool all_gone = testing::wait_until(
      [&] {
        for (pid_t pid : ranks) {
          if (!testing::process_gone(pid)) return false;
        }
        return true;
      },
      5);
  for (pid_t pid : ranks) {
    EXPECT_TRUE(testing::process_gone(pid)) << "rank pid " << pid << " outlived its launcher";
    if (!testing::process_gone(pid)) kill(pid, SIGKILL);  // leave nothing behind
  }
  EXPECT_TRUE(all_gone);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace aspen::parallel
