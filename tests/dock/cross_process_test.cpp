// TransferDock across processes on loopback: the test process hosts the controller
// service; producers and consumers are child processes (child_process.h), each
// producer serving its own warehouse. Pins: every row consumed exactly once per
// consumer with its own data, column data never passes through the controller, and
// a consumer killed with SIGKILL mid-claim loses nothing (its lease expires).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "aspen/dock/controller_protocol.h"
#include "aspen/dock/transfer_dock.h"
#include "aspen/dock/zmq_transport.h"
#include "child_process.h"
#include "dock_test_util.h"

namespace aspen::dock {
namespace {

constexpr char kToken[] = "cross-process-test-token";

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

std::shared_ptr<TransferDock> connect_dock() {
  ZmqTransportOptions options;
  options.controller_endpoint = env_or_empty("ASPEN_DOCK_ENDPOINT");
  options.token = kToken;
  options.rpc_timeout_s = 20.0;
  return std::make_shared<TransferDock>(std::make_shared<ZmqTransport>(options));
}

// Producer: puts its rows (groups of 2), then keeps its warehouse served until
// every row it holds has retired and been erased by the consumers.
void run_producer(int index, int rows) {
  std::shared_ptr<TransferDock> dock = connect_dock();
  for (int i = 0; i < rows; i += 2) {
    const int64_t marker = int64_t{index} * 100000 + i;
    std::vector<RowInfo> infos = {testing::row_info(marker, 2, 1 + i % 13),
                                  testing::row_info(marker, 2, 1 + (i + 5) % 13)};
    dock->put(infos, testing::columns_for(infos, {marker, marker + 1}), 60.0);
  }
  auto& transport = static_cast<ZmqTransport&>(dock->transport());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  while (transport.local_store()->rows_held() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(transport.local_store()->rows_held(), 0);
}

// Consumer: claims until the controller reports every row retired; appends
// "marker tokens_match" lines to its output file.
void run_consumer(const std::string& consumer, int64_t total_rows, const std::string& out_path) {
  std::shared_ptr<TransferDock> dock = connect_dock();
  std::ofstream out(out_path);
  ClaimOptions options;
  options.max_rows = 8;
  options.timeout_s = 0.2;
  options.whole_groups = consumer == "reference";
  options.balance_ranks = 2;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  while (std::chrono::steady_clock::now() < deadline) {
    Claim claim = dock->claim(consumer, options);
    if (claim.empty()) {
      if (dock->transport().controller().metrics()["rows_retired"] == total_rows) return;
      continue;
    }
    std::vector<ColumnData> data = dock->get(claim);
    for (size_t i = 0; i < claim.rows.size(); ++i) {
      const torch::Tensor& tokens = data[0].values[i];
      const bool ok =
          tokens.size(0) == claim.rows[i].info.tokens && tokens.eq(tokens[0]).all().item<bool>();
      out << tokens[0].item<int64_t>() << ' ' << ok << '\n';
    }
    out.flush();
    ASSERT_TRUE(dock->ack(claim));
  }
  FAIL() << "consumer " << consumer << " ran out of time";
}

// Claims rows with a short lease, says so, then waits to be killed.
void run_claim_and_hang(const std::string& flag_path) {
  std::shared_ptr<TransferDock> dock = connect_dock();
  ClaimOptions options;
  options.max_rows = 4;
  options.min_rows = 4;
  options.timeout_s = 10.0;
  options.lease_s = 1.0;
  Claim claim = dock->claim("actor", options);
  ASSERT_EQ(claim.rows.size(), 4u);
  std::ofstream(flag_path) << claim.rows.front().id << '\n';
  std::this_thread::sleep_for(std::chrono::seconds(60));
}

TEST(DockChildProcess, Run) {
  const std::string role = env_or_empty("ASPEN_DOCK_CHILD");
  if (role.empty()) GTEST_SKIP() << "entry point of child processes of the dock tests";
  if (role == "producer") {
    run_producer(std::stoi(env_or_empty("ASPEN_DOCK_INDEX")),
                 std::stoi(env_or_empty("ASPEN_DOCK_ROWS")));
  } else if (role == "consumer") {
    run_consumer(env_or_empty("ASPEN_DOCK_CONSUMER"), std::stoll(env_or_empty("ASPEN_DOCK_TOTAL")),
                 env_or_empty("ASPEN_DOCK_OUT"));
  } else if (role == "claim_and_hang") {
    run_claim_and_hang(env_or_empty("ASPEN_DOCK_OUT"));
  } else {
    FAIL() << "unknown role " << role;
  }
}

std::filesystem::path temp_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("aspen_dock_" + name + "_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(CrossProcessTest, ProducersAndConsumersInSixProcessesConsumeEveryRowOnce) {
  constexpr int kProducers = 3, kRowsPerProducer = 120;
  constexpr int64_t kTotal = kProducers * kRowsPerProducer;
  auto controller =
      std::make_shared<DockController>(testing::two_consumer_schema(), DockControllerOptions{64});
  ControllerService service(controller, ZmqServiceOptions{"tcp://127.0.0.1:*", kToken});
  const auto dir = temp_dir("stress");
  std::vector<pid_t> children;
  for (int p = 0; p < kProducers; ++p) {
    children.push_back(
        testing::spawn_dock_child({{"ASPEN_DOCK_CHILD", "producer"},
                                   {"ASPEN_DOCK_ENDPOINT", service.endpoint()},
                                   {"ASPEN_DOCK_INDEX", std::to_string(p)},
                                   {"ASPEN_DOCK_ROWS", std::to_string(kRowsPerProducer)}}));
  }
  const std::vector<std::string> consumers = {"actor", "actor", "reference"};
  for (size_t c = 0; c < consumers.size(); ++c) {
    children.push_back(testing::spawn_dock_child(
        {{"ASPEN_DOCK_CHILD", "consumer"},
         {"ASPEN_DOCK_ENDPOINT", service.endpoint()},
         {"ASPEN_DOCK_CONSUMER", consumers[c]},
         {"ASPEN_DOCK_TOTAL", std::to_string(kTotal)},
         {"ASPEN_DOCK_OUT", (dir / ("consumer" + std::to_string(c))).string()}}));
  }
  for (pid_t pid : children) {
    ASSERT_GT(pid, 0);
    EXPECT_EQ(testing::wait_dock_child(pid, 150.0), 0);
  }
  std::map<std::string, std::map<int64_t, int>> seen;
  for (size_t c = 0; c < consumers.size(); ++c) {
    std::ifstream in(dir / ("consumer" + std::to_string(c)));
    int64_t marker = 0;
    int ok = 0;
    while (in >> marker >> ok) {
      EXPECT_EQ(ok, 1) << "row " << marker << " came with another row's data";
      seen[consumers[c]][marker]++;
    }
  }
  for (const std::string consumer : {"actor", "reference"}) {
    EXPECT_EQ(seen[consumer].size(), static_cast<size_t>(kTotal)) << consumer;
    for (const auto& [marker, count] : seen[consumer]) EXPECT_EQ(count, 1) << marker;
  }
  nlohmann::json metrics = controller->metrics();
  EXPECT_EQ(metrics["live_rows"], 0);
  EXPECT_EQ(metrics["rows_retired"], kTotal);
  // Metadata only: the controller handler rejects any request carrying a tensor, and
  // its inbound traffic stays at a few hundred bytes per row (allocate, publish,
  // claim and ack records) whatever the row size.
  const auto wire = service.wire_metrics();
  EXPECT_EQ(wire["errors"], 0);
  EXPECT_LT(wire["bytes_in"].get<int64_t>(), kTotal * 400);
  std::filesystem::remove_all(dir);
}

TEST(CrossProcessTest, KilledConsumerLosesNothingItsLeaseExpires) {
  auto controller =
      std::make_shared<DockController>(testing::two_consumer_schema(), DockControllerOptions{16});
  ControllerService service(controller, ZmqServiceOptions{"tcp://127.0.0.1:*", kToken});
  ZmqTransportOptions options;
  options.controller_endpoint = service.endpoint();
  options.token = kToken;
  TransferDock producer(std::make_shared<ZmqTransport>(options));
  std::vector<RowInfo> infos(4, testing::row_info(0, 4, 3));
  std::vector<RowId> ids = producer.put(infos, testing::columns_for(infos, {10, 11, 12, 13}));

  const auto flag = temp_dir("lease") / "claimed";
  pid_t child = testing::spawn_dock_child({{"ASPEN_DOCK_CHILD", "claim_and_hang"},
                                           {"ASPEN_DOCK_ENDPOINT", service.endpoint()},
                                           {"ASPEN_DOCK_OUT", flag.string()}});
  ASSERT_GT(child, 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!std::filesystem::exists(flag) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(std::filesystem::exists(flag)) << "child never claimed";
  EXPECT_TRUE(producer.claim("actor", {}).empty());  // leased by the child
  kill(child, SIGKILL);
  EXPECT_EQ(testing::wait_dock_child(child, 10.0), 128 + SIGKILL);

  ClaimOptions claim_options;
  claim_options.max_rows = 4;
  claim_options.min_rows = 4;
  claim_options.timeout_s = 10.0;
  Claim claim = producer.claim("actor", claim_options);
  ASSERT_EQ(claim.rows.size(), 4u);
  std::set<RowId> got;
  for (const ClaimedRow& row : claim.rows) got.insert(row.id);
  EXPECT_EQ(got, std::set<RowId>(ids.begin(), ids.end()));
  std::vector<ColumnData> data = producer.get(claim);
  EXPECT_EQ(data[0].values[0][0].item<int64_t>(), 10);
  EXPECT_TRUE(producer.ack(claim));
  EXPECT_EQ(controller->metrics()["leases_expired"], 1);
  std::filesystem::remove_all(flag.parent_path());
}

}  // namespace
}  // namespace aspen::dock
