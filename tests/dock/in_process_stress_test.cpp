// In-process TransferDock under concurrency: producer threads on separate
// warehouses, several claimant threads per consumer, a small capacity so producers
// block. Every row must reach every consumer exactly once with its own data, and
// every row must retire and be erased from its warehouse.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "aspen/dock/in_process_transport.h"
#include "aspen/dock/transfer_dock.h"
#include "aspen/util/error.h"
#include "dock_test_util.h"

namespace aspen::dock {
namespace {

TEST(InProcessStressTest, EveryRowConsumedExactlyOncePerConsumer) {
  constexpr int kProducers = 4, kRowsPerProducer = 300, kClaimantsPerConsumer = 3;
  constexpr int kTotal = kProducers * kRowsPerProducer;
  auto shared = std::make_shared<InProcessDock>(testing::two_consumer_schema(),
                                                DockControllerOptions{64}, kProducers);
  std::mutex seen_mutex;
  std::map<std::string, std::map<int64_t, int>> seen;  // consumer -> marker -> count
  std::atomic<int> failures{0};

  std::vector<std::thread> threads;
  for (int p = 0; p < kProducers; ++p) {
    threads.emplace_back([&, p] {
      TransferDock dock(std::make_shared<InProcessTransport>(shared, p));
      for (int i = 0; i < kRowsPerProducer; i += 2) {
        const int64_t marker = p * kRowsPerProducer + i;
        std::vector<RowInfo> rows = {testing::row_info(marker, 2, 1 + marker % 7),
                                     testing::row_info(marker, 2, 1 + (marker + 1) % 7)};
        dock.put(rows, testing::columns_for(rows, {marker, marker + 1}), 30.0);
      }
    });
  }
  for (const std::string consumer : {"actor", "reference"}) {
    for (int c = 0; c < kClaimantsPerConsumer; ++c) {
      threads.emplace_back([&, consumer, c] {
        TransferDock dock(std::make_shared<InProcessTransport>(shared, c % kProducers));
        ClaimOptions options;
        options.max_rows = 4 + c;
        options.timeout_s = 0.2;
        options.whole_groups = c == 0;
        options.balance_ranks = 1 + c;
        int idle = 0;
        while (idle < 10) {  // ~2 s without rows: everything is consumed
          Claim claim = dock.claim(consumer, options);
          if (claim.empty()) {
            ++idle;
            continue;
          }
          idle = 0;
          std::vector<ColumnData> data = dock.get(claim);
          std::lock_guard<std::mutex> lock(seen_mutex);
          for (size_t i = 0; i < claim.rows.size(); ++i) {
            const int64_t marker = data[0].values[i][0].item<int64_t>();
            if (data[0].values[i].size(0) != claim.rows[i].info.tokens) failures++;
            seen[consumer][marker]++;
          }
          if (!dock.ack(claim)) failures++;
        }
      });
    }
  }
  for (std::thread& t : threads) t.join();

  EXPECT_EQ(failures.load(), 0);
  for (const std::string consumer : {"actor", "reference"}) {
    ASSERT_EQ(seen[consumer].size(), static_cast<size_t>(kTotal)) << consumer;
    for (const auto& [marker, count] : seen[consumer]) {
      ASSERT_EQ(count, 1) << consumer << " row " << marker;
    }
  }
  nlohmann::json metrics = shared->controller->metrics();
  EXPECT_EQ(metrics["live_rows"], 0);
  EXPECT_EQ(metrics["rows_retired"], kTotal);
  EXPECT_GT(metrics["producer_wait_s"].get<double>(), 0.0);  // capacity 64 << 1200 rows
  for (const auto& warehouse : shared->warehouses) EXPECT_EQ(warehouse->rows_held(), 0);
}

TEST(TransferDockTest, PutValidatesAgainstTheSchema) {
  auto shared =
      std::make_shared<InProcessDock>(testing::two_consumer_schema(), DockControllerOptions{8}, 1);
  TransferDock dock(std::make_shared<InProcessTransport>(shared, 0));
  std::vector<RowInfo> rows = {testing::row_info(0, 1, 3)};
  std::vector<ColumnData> columns = testing::columns_for(rows, {1});
  columns[0].values[0] = torch::zeros({4}, torch::kInt64);  // 4 entries for 3 tokens
  EXPECT_THROW(dock.put(rows, columns), Error);
  columns = testing::columns_for(rows, {1});
  columns[1].values[0] = columns[1].values[0].to(torch::kFloat64);
  EXPECT_THROW(dock.put(rows, columns), Error);
  EXPECT_EQ(shared->controller->metrics()["live_rows"], 0);  // nothing allocated
}

TEST(TransferDockTest, InProcessGetIsZeroCopy) {
  auto shared =
      std::make_shared<InProcessDock>(testing::two_consumer_schema(), DockControllerOptions{8}, 2);
  TransferDock writer(std::make_shared<InProcessTransport>(shared, 0));
  TransferDock reader(std::make_shared<InProcessTransport>(shared, 1));
  std::vector<RowInfo> rows = {testing::row_info(0, 1, 3)};
  std::vector<ColumnData> columns = testing::columns_for(rows, {5});
  writer.put(rows, columns);
  Claim claim = reader.claim("actor", {});
  std::vector<ColumnData> data = reader.get(claim);
  EXPECT_EQ(data[0].values[0].data_ptr(), columns[0].values[0].data_ptr());
  EXPECT_EQ(reader.metrics()["client"]["bytes_fetched_remote"], 3 * 8 + 4);
}

}  // namespace
}  // namespace aspen::dock
