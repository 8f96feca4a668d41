// Claim options are bounded before they size anything: a peer holding the dock's
// token could otherwise make the controller allocate one load per requested rank
// (2^31 ranks: 16 GB).
#include <gtest/gtest.h>

#include "aspen/dock/controller.h"
#include "aspen/dock/token_balance.h"
#include "aspen/util/error.h"
#include "dock_test_util.h"

namespace aspen {
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

}  // namespace
}  // namespace aspen
