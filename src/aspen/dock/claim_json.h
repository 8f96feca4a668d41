// A Claim as JSON, and one rank's share of a balanced claim.
//
// A distributed stage claims once (on one rank) and hands the claim to every rank
// (parallel/object_collectives.h): the claim carries metadata only — row ids, row
// infos and which warehouse holds each column — so each rank then fetches ITS rows'
// columns straight from the warehouses that hold them (TransferDock::get), and the
// data never passes through the claiming rank. claim_from_json(claim_to_json(c))
// equals c field for field.
// share_of(claim, r): the rows of claim.ranks[r] (a claim made with balance_ranks = d),
// in claim order, same lease/consumer/columns; the whole claim when it is unbalanced.
// Errors: aspen::Error for malformed JSON or a rank outside the partition.
// Thread safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include "aspen/dock/dock_api.h"

namespace aspen {

nlohmann::json claim_to_json(const Claim& claim);
Claim claim_from_json(const nlohmann::json& json);
Claim share_of(const Claim& claim, int rank);

}  // namespace aspen
