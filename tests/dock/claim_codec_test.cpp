// A claim survives its one encoding field for field, a damaged encoding is an error,
// and a rank's share of a balanced claim holds exactly that rank's rows, in claim order.
#include "aspen/dock/claim_codec.h"

#include <gtest/gtest.h>

#include "aspen/util/error.h"

namespace aspen::dock {
namespace {

Claim balanced_claim() {
  Claim claim;
  claim.lease = 7;
  claim.consumer = "actor_update";
  claim.columns = {"prompt", "response"};
  for (RowId id : {10, 11, 12, 13}) {
    ClaimedRow row;
    row.id = id;
    row.info.group_id = id / 2;
    row.info.group_size = 2;
    row.info.tokens = id;
    row.info.version = 3;
    row.info.target = static_cast<int32_t>(id % 3) - 1;  // -1 (none) included
    row.locations = {static_cast<WarehouseId>(id % 2), 1};
    claim.rows.push_back(row);
  }
  claim.ranks = {{13, 10}, {11, 12}};
  claim.imbalance = 0.25;
  return claim;
}

TEST(ClaimCodec, RoundTripsEveryField) {
  Claim claim = balanced_claim();
  claim.timed_out = true;
  claim.pending_required_rows = 6;
  claim.ready_rows_left = 9;
  const Claim back = decode_claim(encode_claim(claim));
  EXPECT_EQ(back.lease, claim.lease);
  EXPECT_EQ(back.consumer, claim.consumer);
  EXPECT_EQ(back.columns, claim.columns);
  EXPECT_EQ(back.ranks, claim.ranks);
  EXPECT_DOUBLE_EQ(back.imbalance, claim.imbalance);
  EXPECT_EQ(back.timed_out, claim.timed_out);
  EXPECT_EQ(back.pending_required_rows, 6);
  EXPECT_EQ(back.ready_rows_left, 9);
  ASSERT_EQ(back.rows.size(), claim.rows.size());
  for (size_t i = 0; i < claim.rows.size(); ++i) {
    EXPECT_EQ(back.rows[i].id, claim.rows[i].id);
    EXPECT_EQ(back.rows[i].info.group_id, claim.rows[i].info.group_id);
    EXPECT_EQ(back.rows[i].info.group_size, claim.rows[i].info.group_size);
    EXPECT_EQ(back.rows[i].info.tokens, claim.rows[i].info.tokens);
    EXPECT_EQ(back.rows[i].info.version, claim.rows[i].info.version);
    EXPECT_EQ(back.rows[i].info.target, claim.rows[i].info.target);
    EXPECT_EQ(back.rows[i].locations, claim.rows[i].locations);
  }
}

TEST(ClaimCodec, ShareHoldsTheRanksRowsInClaimOrder) {
  const Claim claim = balanced_claim();
  const Claim first = share_of(claim, 0);
  ASSERT_EQ(first.rows.size(), 2u);
  EXPECT_EQ(first.rows[0].id, 10);  // claim order, not the partition's order
  EXPECT_EQ(first.rows[1].id, 13);
  EXPECT_EQ(first.rows[1].locations, claim.rows[3].locations);
  EXPECT_EQ(first.lease, claim.lease);
  EXPECT_TRUE(first.ranks.empty());
  EXPECT_EQ(share_of(claim, 1).rows[0].id, 11);
  // An unbalanced claim is every rank's whole claim.
  Claim whole = claim;
  whole.ranks.clear();
  EXPECT_EQ(share_of(whole, 5).rows.size(), 4u);
  EXPECT_THROW(share_of(claim, 2), Error);
}

TEST(ClaimCodec, TruncatedOrPaddedEncodingsAreErrors) {
  const std::string bytes = encode_claim(balanced_claim());
  for (size_t cut : {size_t{0}, size_t{5}, bytes.size() / 2, bytes.size() - 1}) {
    EXPECT_THROW(decode_claim(bytes.substr(0, cut)), Error) << "cut at " << cut;
  }
  EXPECT_THROW(decode_claim(bytes + "x"), Error);  // trailing bytes: a layout mismatch
}

}  // namespace
}  // namespace aspen::dock
