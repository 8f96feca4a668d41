// Claim options are bounded before they size anything: a peer holding the dock's
// token could otherwise make the controller allocate one load per requested rank
// (2^31 ranks: 16 GB).
#include <gtest/gtest.h>

#include <cmath>

#include "aspen/dock/controller.h"
#include "aspen/dock/token_balance.h"
#include "aspen/util/error.h"
#include "dock_test_util.h"

namespace aspen::dock {
namespace {

TEST(ClaimBounds, BalancingOverMoreRanksThanTheBoundIsRefused) {
  EXPECT_THROW(balance_by_tokens({1, 2, 3}, kMaxBalanceRanks + 1), Error);
  EXPECT_NO_THROW(balance_by_tokens({1, 2, 3}, kMaxBalanceRanks));
  DockController controller(testing::two_consumer_schema());
  ClaimOptions options;
  options.balance_ranks = 2147483647;
  try {
    controller.claim("actor", options);
    FAIL() << "a claim over 2^31 - 1 ranks was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("balance_ranks 2147483647"), std::string::npos)
        << e.what();
  }
}

// Found by fuzz_dock_frames: a claim frame with a NaN timeout reached duration_cast
// (undefined behaviour, UBSan's "-nan is outside the range of long"). It is refused
// by name; infinity and negative timeouts stay valid (wait forever / do not wait).
TEST(ClaimBounds, ANanTimeoutIsRefusedNamingIt) {
  DockController controller(testing::two_consumer_schema());
  ClaimOptions options;
  options.timeout_s = std::nan("");
  try {
    controller.claim("actor", options);
    FAIL() << "a NaN timeout was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("timeout_s is NaN"), std::string::npos) << e.what();
  }
  EXPECT_THROW(controller.allocate({}, std::nan("")), Error);
  options.timeout_s = -1.0;
  EXPECT_FALSE(controller.try_claim("actor", options).has_value());
}

}  // namespace
}  // namespace aspen::dock
