#include "aspen/dock/claim_codec.h"

#include <set>

#include "aspen/dock/imports.h"
#include "aspen/util/error.h"

namespace aspen::dock {

void put_row_info(ByteWriter& w, const RowInfo& info) {
  w.put<int64_t>(info.group_id).put<int32_t>(info.group_size);
  w.put<int64_t>(info.tokens).put<int64_t>(info.version).put<int32_t>(info.target);
}

RowInfo get_row_info(ByteReader& r) {
  RowInfo info;
  info.group_id = r.get<int64_t>();
  info.group_size = r.get<int32_t>();
  info.tokens = r.get<int64_t>();
  info.version = r.get<int64_t>();
  info.target = r.get<int32_t>();
  return info;
}

std::string encode_claim(const Claim& claim) {
  ByteWriter w;
  w.put<int64_t>(claim.lease).put_string(claim.consumer).put_strings(claim.columns);
  w.put<uint32_t>(static_cast<uint32_t>(claim.rows.size()));
  for (const ClaimedRow& row : claim.rows) {
    w.put<int64_t>(row.id);
    put_row_info(w, row.info);
    w.put_vector<int32_t>(row.locations);
  }
  w.put<uint32_t>(static_cast<uint32_t>(claim.ranks.size()));
  for (const std::vector<RowId>& rank : claim.ranks) w.put_vector<int64_t>(rank);
  w.put<double>(claim.imbalance).put<uint8_t>(claim.timed_out);
  w.put<int64_t>(claim.pending_required_rows).put<int64_t>(claim.ready_rows_left);
  return w.take();
}

Claim decode_claim(const std::string& bytes) {
  ByteReader r(bytes);
  Claim claim;
  claim.lease = r.get<int64_t>();
  claim.consumer = r.get_string();
  claim.columns = r.get_strings();
  const uint32_t rows = r.get<uint32_t>();
  for (uint32_t i = 0; i < rows; ++i) {
    ClaimedRow row;
    row.id = r.get<int64_t>();
    row.info = get_row_info(r);
    row.locations = r.get_vector<int32_t>();
    claim.rows.push_back(std::move(row));
  }
  const uint32_t ranks = r.get<uint32_t>();
  for (uint32_t i = 0; i < ranks; ++i) claim.ranks.push_back(r.get_vector<int64_t>());
  claim.imbalance = r.get<double>();
  claim.timed_out = r.get<uint8_t>() != 0;
  claim.pending_required_rows = r.get<int64_t>();
  claim.ready_rows_left = r.get<int64_t>();
  r.expect_end();
  return claim;
}

Claim share_of(const Claim& claim, int rank) {
  if (claim.ranks.empty()) return claim;
  check_input(rank >= 0 && rank < static_cast<int>(claim.ranks.size()),
              "rank " + std::to_string(rank) + " is outside the claim's " +
                  std::to_string(claim.ranks.size()) + "-rank partition",
              "dock claim share");
  const std::set<RowId> mine(claim.ranks[static_cast<size_t>(rank)].begin(),
                             claim.ranks[static_cast<size_t>(rank)].end());
  Claim share = claim;
  share.rows.clear();
  share.ranks.clear();
  for (const ClaimedRow& row : claim.rows) {
    if (mine.count(row.id)) share.rows.push_back(row);
  }
  return share;
}

}  // namespace aspen::dock
