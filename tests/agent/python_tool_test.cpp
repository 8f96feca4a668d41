// The python tool and its sandbox (agent/python_tool.h, sandboxed_process.h): results,
// tracebacks, the wall timeout, the CPU, memory and file limits, output truncation, the
// network cut, the environment and file descriptors kept from the program, and nothing
// left behind. About 4 s in all: the timeout and CPU-limit runs take a second each.
#include "aspen/agent/python_tool.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "support/oracles.h"

namespace aspen::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

// Each test runs its programs under a temp root of its own, so that "nothing left
// behind" is checked on exactly the directories this test's runs made.
class PythonToolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::temp_directory_path() /
            ("aspen_python_tool_" + std::to_string(getpid()) + "_" + info->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    options_.python = testing::python();
    options_.limits.temp_root = root_.string();
  }
  void TearDown() override {
    EXPECT_TRUE(fs::is_empty(root_)) << "a run left files under " << root_;
    fs::remove_all(root_);
  }

  ToolResult run(const std::string& code) const {
    return PythonTool(options_).call({{"code", code}});
  }

  fs::path root_;
  PythonToolOptions options_;
};

TEST_F(PythonToolTest, PrintsResults) {
  const ToolResult result = run("print(2**100)\nprint(sum(range(10)))");
  EXPECT_TRUE(result.ok);
  EXPECT_EQ(result.text, "1267650600228229401496703205376\n45\n");
  EXPECT_EQ(run("x = 1").text, "(no output)");
}

TEST_F(PythonToolTest, ErrorsCarryTheTraceback) {
  const ToolResult result = run("print('before')\nraise ValueError('bad value')");
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.text.substr(0, 21), "error: exit status 1\n");
  EXPECT_NE(result.text.find("before\n"), std::string::npos);
  EXPECT_NE(result.text.find("ValueError: bad value"), std::string::npos);
  EXPECT_EQ(run("import sys; sys.exit(3)").text, "error: exit status 3");
  EXPECT_NE(run("def f(:\n").text.find("SyntaxError"), std::string::npos);
}

TEST_F(PythonToolTest, BadArgumentsAreErrorObservations) {
  const PythonTool tool(options_);
  EXPECT_EQ(tool.call(ordered_json::object()).text,
            "error: missing string argument \"code\"; the python tool takes {\"code\": \"...\"}");
  EXPECT_EQ(tool.call({{"code", "print(1)"}, {"timeout", 5}}).text,
            "error: unexpected argument \"timeout\"; the python tool takes {\"code\": \"...\"}");
}

TEST_F(PythonToolTest, AnInfiniteLoopTimesOutWithinASecondOfTheLimit) {
  options_.limits.wall_seconds = 1;
  const auto start = std::chrono::steady_clock::now();
  const ToolResult result = run("print('started')\nwhile True: pass");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 2.0);
  EXPECT_GE(seconds, 1.0);
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.text, "error: timed out after 1 s (killed)\nstarted\n");
}

TEST_F(PythonToolTest, CpuTimeIsLimitedToo) {
  options_.limits.cpu_seconds = 1;
  const ToolResult result = run("while True: pass");
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.text, "error: CPU time limit of 1 s exceeded");
}

TEST_F(PythonToolTest, TenMegabytesOfOutputAreTruncatedAndSaySo) {
  options_.limits.max_output_bytes = 1000;
  const ToolResult result = run("import sys\nsys.stdout.write('x' * 10_000_000)\nprint('done')");
  EXPECT_TRUE(result.ok);
  EXPECT_EQ(result.text, std::string(1000, 'x') +
                             "\n[output truncated: showed the first 1000 of 10000005 bytes]");
}

TEST_F(PythonToolTest, AMemoryBombMeetsTheAddressSpaceLimit) {
  options_.limits.address_space_bytes = uint64_t{512} << 20;
  const auto start = std::chrono::steady_clock::now();
  const ToolResult result = run("x = bytearray(8 * 1024**3)\nprint('allocated')");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
  EXPECT_FALSE(result.ok);
  EXPECT_NE(result.text.find("MemoryError"), std::string::npos) << result.text;
  EXPECT_EQ(result.text.find("allocated"), std::string::npos);
}

TEST_F(PythonToolTest, FileSizeIsLimited) {
  options_.limits.file_size_bytes = 1 << 20;
  const ToolResult result = run("open('big', 'wb').write(b'x' * (4 << 20))");
  // Python ignores SIGXFSZ, so the write past the limit fails with EFBIG instead.
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.text.rfind("error: exit status 1\n", 0), 0u) << result.text;
  EXPECT_NE(result.text.find("OSError: [Errno 27] File too large"), std::string::npos);
}

TEST_F(PythonToolTest, RunsInAFreshDirectoryThatIsRemovedWithWhatItWrote) {
  const std::string code =
      "import os, subprocess\n"
      "print(os.getcwd())\n"
      "print(sorted(os.listdir('.')))\n"
      "os.makedirs('a/b')\n"
      "open('a/b/f', 'w').write('x')\n"
      "os.chmod('a', 0)\n"  // taken permissions do not stop the cleanup
      "print(os.environ['HOME'] == os.getcwd(), os.environ.get('ASPEN_TEST_SECRET'))\n";
  setenv("ASPEN_TEST_SECRET", "leaked", 1);
  const ToolResult first = run(code);
  const ToolResult second = run(code);
  unsetenv("ASPEN_TEST_SECRET");
  ASSERT_TRUE(first.ok) << first.text;
  EXPECT_EQ(first.text.rfind(root_.string() + "/aspen-tool-", 0), 0u) << first.text;
  EXPECT_NE(first.text.find("\n['main.py']\nTrue None\n"), std::string::npos) << first.text;
  EXPECT_NE(first.text.substr(0, first.text.find('\n')),
            second.text.substr(0, second.text.find('\n')));
  // TearDown checks the root is empty again.
}

TEST_F(PythonToolTest, AspensFileDescriptorsAreNotInherited) {
  const int fd = open("/dev/null", O_RDONLY);  // not close-on-exec
  ASSERT_GE(fd, 3);
  const ToolResult result = run("import os\ntry:\n    os.fstat(" + std::to_string(fd) +
                                ")\n    print('open')\nexcept OSError:\n    print('closed')");
  close(fd);
  EXPECT_EQ(result.text, "closed\n");
}

TEST_F(PythonToolTest, ProcessesItStartsDoNotOutliveIt) {
  const ToolResult result =
      run("import subprocess\np = subprocess.Popen(['sleep', '30'])\nprint(p.pid)");
  ASSERT_TRUE(result.ok) << result.text;
  const std::string stat = "/proc/" + std::to_string(std::stoi(result.text)) + "/stat";
  // Killed with the group: soon gone, or a zombie until its new parent reaps it (a
  // process still dying shows as running for a moment).
  std::string state = "?";
  for (int tries = 0; tries < 100 && state != "Z" && state != "gone"; ++tries) {
    std::ifstream in(stat);
    std::string pid, name;
    if (!(in >> pid >> name >> state)) state = "gone";
    if (state != "Z" && state != "gone") std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(state == "Z" || state == "gone") << stat << " state " << state;
}

// Python connects to a socket this test listens on: it gets through without isolation,
// and finds no network at all (not even loopback) inside `unshare -n`.
TEST_F(PythonToolTest, NoNetworkWhereUnshareWorks) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  socklen_t length = sizeof(address);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const std::string code =
      "import socket\ntry:\n    socket.create_connection(('127.0.0.1', " +
      std::to_string(ntohs(address.sin_port)) +
      "), timeout=2)\n    print('connected')\nexcept OSError as e:\n    print('no network:', "
      "e.strerror)";
  options_.limits.isolate_network = false;
  EXPECT_EQ(run(code).text, "connected\n");
  options_.limits.isolate_network = true;
  const bool isolated = network_isolation() != NetworkIsolation::kNone;
  EXPECT_EQ(run(code).text, isolated ? "no network: Network is unreachable\n" : "connected\n")
      << network_isolation_name(network_isolation());
  close(listener);
  const std::string description =
      PythonTool(options_).schema()["function"]["description"].get<std::string>();
  EXPECT_EQ(description.find("without network") != std::string::npos, isolated) << description;
}

TEST(SandboxOutputTextTest, CutsAtCharacterBoundariesAndRepairsBadBytes) {
  SandboxRun run;
  run.output = "ab\xe2\x82\xac";  // "ab€", kept whole within the limit
  run.output_bytes = run.output.size();
  EXPECT_EQ(sandbox_output_text(run, 16), "ab\xe2\x82\xac");
  // The limit falls inside the euro sign: it goes whole, never as a broken sequence.
  EXPECT_EQ(sandbox_output_text(run, 4), "ab\n[output truncated: showed the first 2 of 5 bytes]");
  // The sandbox itself kept only 4 of 5 bytes: the same.
  run.output = "ab\xe2\x82";
  EXPECT_EQ(sandbox_output_text(run, 4), "ab\n[output truncated: showed the first 2 of 5 bytes]");
  // Bytes the program wrote that are not UTF-8 become U+FFFD.
  run.output =
      "a\xff"
      "b";
  run.output_bytes = 3;
  EXPECT_EQ(sandbox_output_text(run, 16),
            "a\xef\xbf\xbd"
            "b");
}

}  // namespace
}  // namespace aspen::agent
