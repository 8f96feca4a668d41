// Claim decoding (dock/claim_codec.h), as the controller's claim replies and a
// distributed stage's broadcast carry it. Input: the encoded claim; the first byte
// also picks a rank for share_of. Checks: decode works or raises aspen::Error; a
// decoded claim's encoding decodes to a claim with the same encoding (a flag byte of 2
// reads as true and is written as 1, so only the second trip is a fixed point), and
// share_of either raises aspen::Error or returns rows of the claim.
#include <set>

#include "aspen/dock/claim_codec.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  aspen::dock::Claim claim;
  try {
    claim = aspen::dock::decode_claim(bytes);
  } catch (const aspen::Error&) {
    return 0;
  } catch (const std::exception& e) {
    aspen::fuzz::defect(std::string("decode_claim let a non-aspen exception escape: ") +
                        e.what());
  }
  const std::string encoded = aspen::dock::encode_claim(claim);
  try {
    aspen::fuzz::require(aspen::dock::encode_claim(aspen::dock::decode_claim(encoded)) == encoded,
                         "encode -> decode -> encode round trip");
  } catch (const aspen::Error& e) {
    aspen::fuzz::defect(std::string("an encoded claim does not decode: ") + e.what());
  }
  const int rank = size > 0 ? data[0] % 8 : 0;
  ASPEN_FUZZ_CONTRACT({
    const aspen::dock::Claim share = aspen::dock::share_of(claim, rank);
    std::set<aspen::dock::RowId> ids;
    for (const aspen::dock::ClaimedRow& row : claim.rows) ids.insert(row.id);
    for (const aspen::dock::ClaimedRow& row : share.rows) {
      aspen::fuzz::require(ids.count(row.id) == 1, "a share holds only the claim's rows");
    }
  });
  return 0;
}
