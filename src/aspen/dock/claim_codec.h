// The one encoding of a Claim, and one rank's share of a balanced claim.
//
// encode_claim / decode_claim: the binary form (dock/wire_format.h's ByteWriter and
// ByteReader) that the controller protocol replies with, and that a distributed stage
// hands to every rank after claiming once (parallel/object_collectives.h). A claim
// carries metadata only — row ids, row infos and which warehouse holds each column —
// so each rank then fetches ITS rows' columns straight from the warehouses that hold
// them (TransferDock::get); the data never passes through the claiming rank.
// decode_claim(encode_claim(c)) equals c field for field.
// share_of(claim, r): the rows of claim.ranks[r] (a claim made with balance_ranks = d),
// in claim order, same lease/consumer/columns; the whole claim when it is unbalanced.
// Errors: aspen::Error for a truncated or malformed encoding (ByteReader's, naming the
// dock wire) and for a rank outside the partition.
// Thread safety: pure functions.
#pragma once

#include <string>

#include "aspen/dock/dock_api.h"
#include "aspen/dock/imports.h"
#include "aspen/dock/wire_format.h"

namespace aspen::dock {

void put_row_info(ByteWriter& w, const RowInfo& info);
RowInfo get_row_info(ByteReader& r);

std::string encode_claim(const Claim& claim);
Claim decode_claim(const std::string& bytes);

Claim share_of(const Claim& claim, int rank);

}  // namespace aspen::dock
