// tokenizer.json loading, then encode/decode. Input: tokenizer.json text, a NUL byte,
// then text to encode (also read as token ids to decode).
// Checks: loading, encoding and decoding fuzzed ids either work or throw aspen::Error;
// the ids encode returns always decode (no error), with and without special tokens.
#include <cstring>
#include <vector>

#include "aspen/tokenizer/tokenizer.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [json, text] = aspen::fuzz::split_at_nul(data, size);
  ASPEN_FUZZ_CONTRACT({
    const aspen::tokenizer::Tokenizer tokenizer = aspen::tokenizer::Tokenizer::from_json(std::string(json), "fuzz.json");
    const int64_t vocab = tokenizer.vocab_size();
    // Declared ids are bounded by the entries the file holds (tokenizer.h).
    aspen::fuzz::require(vocab >= 0 && static_cast<size_t>(vocab) <= 2 * json.size() + 1024,
                         "vocab_size bounded by the file size");
    std::vector<aspen::tokenizer::TokenId> ids;
    bool encoded = false;
    try {
      ids = tokenizer.encode(text);
      encoded = true;
    } catch (const aspen::Error&) {
      // invalid UTF-8 text: the only reason encode may refuse
    }
    if (encoded) {
      for (const aspen::tokenizer::TokenId id : ids) {
        aspen::fuzz::require(id >= 0 && id < vocab, "encode returns ids below vocab_size");
      }
      try {
        tokenizer.decode(ids, false);
        tokenizer.decode(ids, true);
      } catch (const aspen::Error& e) {
        aspen::fuzz::defect(std::string("decode refused ids encode returned: ") + e.what());
      }
    }
    // The text's bytes as ids (4 bytes each), mostly out of range: Error, never a crash.
    std::vector<aspen::tokenizer::TokenId> fuzzed(text.size() / 4);
    if (!fuzzed.empty()) std::memcpy(fuzzed.data(), text.data(), fuzzed.size() * 4);
    for (aspen::tokenizer::TokenId& id : fuzzed) id = vocab > 0 ? id % static_cast<int32_t>(vocab + 1) : id;
    tokenizer.decode(fuzzed, text.size() % 2 == 0);
  });
  return 0;
}
