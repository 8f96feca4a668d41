#include "aspen/dock/claim_json.h"

#include <set>

#include "aspen/util/error.h"

namespace aspen {

nlohmann::json claim_to_json(const Claim& claim) {
  nlohmann::json rows = nlohmann::json::array();
  for (const ClaimedRow& row : claim.rows) {
    rows.push_back({row.id, row.info.group_id, row.info.group_size, row.info.tokens,
                    row.info.version, row.locations});
  }
  return {{"lease", claim.lease},        {"consumer", claim.consumer},
          {"columns", claim.columns},    {"rows", rows},
          {"ranks", claim.ranks},        {"imbalance", claim.imbalance},
          {"timed_out", claim.timed_out}};
}

Claim claim_from_json(const nlohmann::json& json) {
  try {
    Claim claim;
    claim.lease = json.at("lease").get<int64_t>();
    claim.consumer = json.at("consumer").get<std::string>();
    claim.columns = json.at("columns").get<std::vector<std::string>>();
    for (const auto& row : json.at("rows")) {
      ClaimedRow r;
      r.id = row.at(0).get<RowId>();
      r.info.group_id = row.at(1).get<int64_t>();
      r.info.group_size = row.at(2).get<int32_t>();
      r.info.tokens = row.at(3).get<int64_t>();
      r.info.version = row.at(4).get<int64_t>();
      r.locations = row.at(5).get<std::vector<WarehouseId>>();
      claim.rows.push_back(std::move(r));
    }
    claim.ranks = json.at("ranks").get<std::vector<std::vector<RowId>>>();
    claim.imbalance = json.at("imbalance").get<double>();
    claim.timed_out = json.at("timed_out").get<bool>();
    return claim;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("malformed claim: ") + e.what(), "dock claim (JSON)");
  }
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

}  // namespace aspen
