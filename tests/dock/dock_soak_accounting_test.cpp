// The dock soak's own checks can fail: a row's bytes are verified against its key
// (a flipped byte, a short row or another row's data is caught), and the ledger
// flags duplicates, acks without a journal entry, rows never consumed, and rows lost
// with a warehouse that neither owned nor held them, while a kill between a
// consumer's journal and its ack (journaled, never acked, consumed by a replacement)
// is no violation.
#include <gtest/gtest.h>

#include "bench/dock_soak_ledger.h"
#include "bench/dock_soak_rows.h"

namespace aspen::dock {
namespace {

using namespace aspen::bench;

constexpr uint64_t kSeed = 3;
constexpr int64_t kMaxBytes = 4096;

TEST(DockSoakRows, RowDataMatchesItsKeyOnly) {
  const int64_t key = soak_row_key(5, 17);
  torch::Tensor data = soak_row_data(key, kSeed, kMaxBytes);
  EXPECT_EQ(data.numel(), soak_row_bytes(key, kSeed, kMaxBytes));
  EXPECT_EQ(soak_row_mismatch(data, key, kSeed, kMaxBytes), "");
  torch::Tensor flipped = data.clone();
  flipped.data_ptr<uint8_t>()[flipped.numel() - 1] ^= 1;  // in the tail past the last word
  EXPECT_NE(soak_row_mismatch(flipped, key, kSeed, kMaxBytes), "");
  EXPECT_NE(soak_row_mismatch(data.slice(0, 0, data.numel() - 1).clone(), key, kSeed, kMaxBytes),
            "");
  const int64_t other = soak_row_key(5, 18);
  EXPECT_NE(soak_row_mismatch(soak_row_data(other, kSeed, kMaxBytes), key, kSeed, kMaxBytes), "");
  EXPECT_NE(soak_row_mismatch(data, key, kSeed + 1, kMaxBytes), "");  // another run's row
}

// Rows 1..4 owned by warehouse 0, two consumers.
class DockSoakLedgerTest : public ::testing::Test {
 protected:
  DockSoakLedgerTest() : ledger({"c0", "c1"}), hooks(ledger.hooks()) {
    hooks.allocated({1, 2, 3, 4}, std::vector<RowInfo>(4, RowInfo{0, 1, 100, 0, -1}), 0);
  }
  // Consumer c journals then acks `rows`, as a soak consumer does.
  void consume(int c, const std::vector<RowId>& rows) {
    ledger.journal_ok(c, rows);
    hooks.acked(c, rows);
  }
  std::vector<std::string> judge() {
    std::vector<std::string> violations;
    report = ledger.verdict(violations);
    return violations;
  }
  SoakLedger ledger;
  DockLedgerHooks hooks;
  nlohmann::json report;
};

TEST_F(DockSoakLedgerTest, EveryRowConsumedOnceByEachConsumerHolds) {
  consume(0, {1, 2, 3, 4});
  consume(1, {1, 2, 3, 4});
  EXPECT_TRUE(judge().empty());
  EXPECT_EQ(report["rows_consumed"]["c1"], 4);
  EXPECT_EQ(report["bytes_moved"], 800);
}

TEST_F(DockSoakLedgerTest, KillBetweenJournalAndAckIsNoViolation) {
  ledger.journal_ok(0, {1, 2});  // journaled, then killed before its ack
  consume(0, {1, 2, 3, 4});      // the replacement consumes them after the lease expired
  consume(1, {1, 2, 3, 4});
  EXPECT_TRUE(judge().empty());
}

TEST_F(DockSoakLedgerTest, DuplicateUnverifiedAndMissingConsumptionAreViolations) {
  consume(0, {1, 2, 3, 4});
  hooks.acked(0, {2});        // acked twice
  hooks.acked(1, {1, 2, 3});  // never journaled; row 4 never consumed by c1
  const std::vector<std::string> violations = judge();
  EXPECT_EQ(report["duplicates"], 1);
  EXPECT_EQ(report["unverified_acks"], 3);
  EXPECT_EQ(report["unconsumed"], 1);
  EXPECT_EQ(violations.size(), 3u);
}

TEST_F(DockSoakLedgerTest, LostRowsCountOnlyWithTheirOwnersWarehouse) {
  consume(0, {1, 2});
  consume(1, {1});
  ledger.record_lost(0, {{2, {0}}, {3, {0}}, {4, {}}});  // partly, not consumed, unpublished
  EXPECT_TRUE(judge().empty());
  EXPECT_EQ(report["rows_lost"], 3);
  EXPECT_EQ(report["lost"]["published_partly_consumed"], 1);
  EXPECT_EQ(report["lost"]["published_unconsumed"], 1);
  EXPECT_EQ(report["lost"]["unpublished"], 1);
  EXPECT_EQ(report["rows_published"], 3);
  ledger.record_lost(5, {{3, {0}}});  // warehouse 5 neither owned nor held row 3
  EXPECT_FALSE(judge().empty());
}

TEST_F(DockSoakLedgerTest, IntegrityFailureIsAViolation) {
  consume(0, {1, 2, 3, 4});
  ledger.journal_bad(1, 1, "wrong bytes at offset 0");
  hooks.acked(1, {1});
  consume(1, {2, 3, 4});
  const std::vector<std::string> violations = judge();
  ASSERT_EQ(violations.size(), 1u);
  EXPECT_EQ(report["integrity_failures"], 1);
  EXPECT_EQ(report["unverified_acks"], 0);  // a bad row is journaled too
}

}  // namespace
}  // namespace aspen::dock
