// AgentProgram and run_agent_process with tiny shell and Python programs: a run gets its
// row on stdin and its endpoint, key and session in the environment, and its trajectory
// is what its session recorded; every fault (hang, crash, garbage, 10 MB of output, no
// calls) ends the episode with a one-line error and its metric, promptly, and the pool
// bounds how many programs run at once. The endpoint side (calls over HTTP with the
// official openai client) is tests/serve/agent_endpoint_test.cpp.
#include "aspen/agent/agent_program.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "aspen/agent/agent_sessions.h"
#include "aspen/tokenizer/tokenizer.h"
#include "support/oracles.h"

namespace aspen::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

std::shared_ptr<const Tokenizer> program_test_tokenizer() {
  static const auto tokenizer =
      std::make_shared<const Tokenizer>(Tokenizer::from_file(testing::qwen3_tokenizer_dir()));
  return tokenizer;
}

AgentProgramOptions program_options(const std::string& command, double timeout_s = 10) {
  AgentProgramOptions options;
  options.command = command;
  options.base_url = "http://127.0.0.1:9/v1";
  options.api_key = "secret-of-this-run";
  options.timeout_s = timeout_s;
  return options;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The endpoint's part, played by the test: the program writes what it got into `dir`
// and waits for `dir/go`; meanwhile the test records one call in its session.
TEST(AgentProgram, ARunGetsItsRowAndEnvironmentAndTrainsOnWhatItsSessionRecorded) {
  const fs::path dir =
      fs::temp_directory_path() / ("aspen-agent-program-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  AgentSessions sessions(program_test_tokenizer(), PrefixBreak::kSplit);
  const std::string script =
      "import json, os, sys, time\n"
      "row = json.loads(sys.stdin.readline())\n"
      "d = sys.argv[1]\n"
      "json.dump({'row': row, 'url': os.environ['OPENAI_BASE_URL'],\n"
      "           'key': os.environ['OPENAI_API_KEY']}, open(d + '/seen.json', 'w'))\n"
      "open(d + '/session.tmp', 'w').write(os.environ['ASPEN_SESSION'])\n"
      "os.rename(d + '/session.tmp', d + '/session')\n"
      "while not os.path.exists(d + '/go'): time.sleep(0.01)\n"
      "print(json.dumps({'reward': row['target'] * 0.5}))\n";
  std::ofstream(dir / "agent.py") << script;
  AgentProgram program(
      program_options(testing::python() + " " + (dir / "agent.py").string() + " " + dir.string()),
      sessions);
  const std::vector<TokenId> out = {9707, 0};
  std::thread endpoint([&] {
    while (!fs::exists(dir / "session")) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const std::string session = read_file(dir / "session");
    sessions.begin_call(session, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    sessions.finish_call(session, out, {-0.25f, -0.5f}, {2, 2}, /*tool_calls=*/3,
                         /*tool_errors=*/1);
    std::ofstream(dir / "go") << "";
  });
  const AgentEpisode episode = program.run(ordered_json{{"target", 3}, {"text", "é\n\"x\""}});
  endpoint.join();
  EXPECT_TRUE(episode.ok()) << episode.error;
  EXPECT_EQ(episode.reward, 1.5);
  EXPECT_EQ(episode.turns, 1);
  EXPECT_EQ(episode.tool_calls, 3);
  EXPECT_EQ(episode.tool_errors, 1);
  ASSERT_EQ(episode.segments.size(), 1u);
  EXPECT_EQ(episode.segments[0].tool_calls, 3);
  EXPECT_EQ(episode.segments[0].response, out);
  EXPECT_EQ(episode.segments[0].loss_mask, (std::vector<float>{1, 1}));
  EXPECT_EQ(episode.session, read_file(dir / "session"));
  const ordered_json seen = ordered_json::parse(read_file(dir / "seen.json"));
  EXPECT_EQ(seen["row"], (ordered_json{{"target", 3}, {"text", "é\n\"x\""}}));
  EXPECT_EQ(seen["url"], "http://127.0.0.1:9/v1");
  EXPECT_EQ(seen["key"], "secret-of-this-run");
  // The program has ended: its session is closed, a late call is refused.
  EXPECT_THROW(sessions.begin_call(episode.session, "x"), SessionRefused);
  EXPECT_EQ(sessions.metrics().at("agent_late_calls"), 1);
  EXPECT_EQ(program.metrics().at("agent_episodes"), 1);
  fs::remove_all(dir);
}

struct FaultCase {
  std::string name;
  std::string command;
  AgentFault fault;
  std::string error_part;
};

TEST(AgentProgram, EachFaultEndsTheEpisodeWithItsErrorAndMetricPromptly) {
  AgentSessions sessions(program_test_tokenizer(), PrefixBreak::kSplit);
  const std::vector<FaultCase> cases = {
      {"hang", "sleep 30 & sleep 30", AgentFault::kTimeout, "timed out after 0.4 s"},
      {"crash", "echo 'Traceback: boom' >&2; exit 3", AgentFault::kCrash,
       "exited with status 3; stderr: Traceback: boom"},
      {"signal", "kill -9 $$", AgentFault::kCrash, "killed by signal 9"},
      {"missing program", "/nonexistent/agent", AgentFault::kCrash, "exited with status 127"},
      {"no reward line", "cat > /dev/null", AgentFault::kGarbage, "printed no reward line"},
      {"not json", "echo 'reward: 1'", AgentFault::kGarbage, "bad reward line"},
      {"reward not a number", "echo '{\"reward\": \"high\"}'", AgentFault::kGarbage,
       "finite number"},
      {"two lines", "echo log; echo '{\"reward\": 1}'", AgentFault::kGarbage, "more than one line"},
      {"10 MB on stdout", "head -c 10000000 /dev/zero | tr '\\0' x", AgentFault::kOversized,
       "printed 10000000 bytes on stdout"},
      {"no calls", "cat > /dev/null; echo '{\"reward\": 1}'", AgentFault::kNoCalls,
       "made no call with its session id"},
      {"10 MB on stderr, no calls", "head -c 10000000 /dev/zero >&2; echo '{\"reward\": 1}'",
       AgentFault::kNoCalls, "made no call"},
      {"ignores a large row", "echo '{\"reward\": 1}'", AgentFault::kNoCalls, "made no call"},
  };
  const ordered_json big_row = {{"text", std::string(4 << 20, 'r')}};
  for (const FaultCase& c : cases) {
    AgentProgram program(program_options(c.command, c.name == "hang" ? 0.4 : 10), sessions);
    const auto start = Clock::now();
    const AgentEpisode episode =
        program.run(c.name == "ignores a large row" ? big_row : ordered_json{{"x", 1}});
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_EQ(episode.fault, c.fault) << c.name << ": " << episode.error;
    EXPECT_NE(episode.error.find(c.error_part), std::string::npos)
        << c.name << ": " << episode.error;
    EXPECT_EQ(episode.error.find('\n'), std::string::npos) << c.name;
    EXPECT_LT(episode.error.size(), 1000u) << c.name;
    EXPECT_LT(seconds, 5.0) << c.name;
    EXPECT_EQ(program.metrics().at(agent_fault_metric(c.fault)), 1) << c.name;
  }
  EXPECT_EQ(sessions.open_sessions(), 0);
}

TEST(AgentProgram, ProcessOutputIsBoundedAndTheWholeGroupDies) {
  AgentProcessLimits limits;
  limits.wall_seconds = 5;
  limits.max_stdout_bytes = 100;
  limits.max_stderr_bytes = 50;
  const AgentProcessRun run = run_agent_process(
      "head -c 1000000 /dev/zero | tr '\\0' o; head -c 1000000 /dev/zero | tr '\\0' e >&2; "
      "echo tail >&2",
      "", {}, limits);
  EXPECT_TRUE(run.exited);
  EXPECT_EQ(run.out, std::string(100, 'o'));
  EXPECT_EQ(run.out_bytes, 1000000u);
  EXPECT_EQ(run.err, std::string(45, 'e') + "tail\n");
  EXPECT_EQ(run.err_bytes, 1000005u);
  // A child left running in the background dies with the program: the pipe it holds
  // closes and the run returns at once, not after its sleep.
  const auto start = Clock::now();
  const AgentProcessRun orphan = run_agent_process("sleep 20 & echo started", "", {}, limits);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 3.0);
  EXPECT_EQ(orphan.out, "started\n");
  // The environment gets additions and replacements.
  const AgentProcessRun env =
      run_agent_process("echo \"$ASPEN_TEST_A-$HOME\"", "", {"ASPEN_TEST_A=1", "HOME=/h"}, limits);
  EXPECT_EQ(env.out, "1-/h\n");
}

// Alive: a process that exists and is not a zombie (a container's init may not reap).
bool process_alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

TEST(AgentProgram, AProgramDiesWithAnAspenKilledWithoutCleaningUp) {
  const fs::path pid_file =
      fs::temp_directory_path() / ("aspen-agent-orphan-" + std::to_string(getpid()));
  fs::remove(pid_file);
  const pid_t aspen = fork();  // plays Aspen; no other thread runs in this test binary now
  ASSERT_GE(aspen, 0);
  if (aspen == 0) {
    AgentProcessLimits limits;
    limits.wall_seconds = 30;
    run_agent_process("echo $$ > " + pid_file.string() + ".tmp; mv " + pid_file.string() + ".tmp " +
                          pid_file.string() + "; exec sleep 30",
                      "", {}, limits);
    _exit(0);
  }
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!fs::exists(pid_file) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const pid_t program = static_cast<pid_t>(std::stol(read_file(pid_file)));
  EXPECT_TRUE(process_alive(program));
  kill(aspen, SIGKILL);
  waitpid(aspen, nullptr, 0);
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = !process_alive(program);
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(gone) << "the agent program outlived the process that ran it";
  if (!gone) kill(program, SIGKILL);
  fs::remove(pid_file);
}

TEST(AgentProgram, ThePoolRunsAtMostMaxConcurrentProgramsAtOnce) {
  AgentSessions sessions(program_test_tokenizer(), PrefixBreak::kSplit);
  AgentProgramOptions options = program_options("sleep 0.3; echo '{\"reward\": 0}'");
  options.max_concurrent = 2;
  AgentProgram program(options, sessions);
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back([&] { program.run(ordered_json::object()); });
  for (std::thread& thread : threads) thread.join();
  // Two waves of two: at least 0.6 s, however fast the machine.
  EXPECT_GE(std::chrono::duration<double>(Clock::now() - start).count(), 0.6);
  EXPECT_EQ(program.metrics().at("agent_episodes"), 4);
}

TEST(AgentProgram, RewardLinesAreStrict) {
  EXPECT_EQ(parse_reward_line("{\"reward\": -2.5}\n").reward, -2.5);
  EXPECT_TRUE(parse_reward_line("{\"reward\": 1}\r\n").error.empty());
  EXPECT_FALSE(parse_reward_line("{\"reward\": 1, \"extra\": 2}").error.empty());
  EXPECT_FALSE(parse_reward_line("{\"reward\": 1e9}").error.empty());
  EXPECT_FALSE(parse_reward_line("{\"reward\": null}").error.empty());
  EXPECT_FALSE(parse_reward_line("[1]").error.empty());
  EXPECT_FALSE(parse_reward_line("").error.empty());
}

}  // namespace
}  // namespace aspen::agent
