// TextStreamer: the deltas of a sample streamed token by token add up to exactly the
// text the engine reports, never split a UTF-8 character, and never show a stop string
// (or its beginning) that the final text cuts away. Checked on the real Qwen3 tokenizer,
// whose byte-level tokens split multi-byte characters.
#include "aspen/serve/text_streamer.h"

#include <gtest/gtest.h>

#include "support/oracles.h"

namespace aspen::serve {
namespace {

const Tokenizer& qwen3() {
  static const Tokenizer tokenizer = Tokenizer::from_file(testing::qwen3_tokenizer_json());
  return tokenizer;
}

bool valid_utf8(const std::string& text) {
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = text[i];
    const size_t length = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (length == 0 || i + length > text.size()) return false;
    for (size_t k = 1; k < length; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return false;
    }
    i += length;
  }
  return true;
}

TEST(TextStreamer, DeltasAddUpToTheDecodedTextWithoutSplittingCharacters) {
  const std::string text = "Grüße, 世界! Emoji 🙂🚀, hieroglyphs 𓀀𓁐𓂀 and math: ∑x² ≤ 3. Done.";
  const std::vector<TokenId> tokens = qwen3().encode(text);
  TextStreamer streamer(qwen3(), {});
  std::string joined;
  bool some_token_gave_nothing = false;
  for (TokenId token : tokens) {
    const std::string delta = streamer.append(token);
    EXPECT_TRUE(valid_utf8(delta)) << "delta of token " << token;
    some_token_gave_nothing = some_token_gave_nothing || delta.empty();
    joined += delta;
  }
  joined += streamer.finish(qwen3().decode(tokens, /*skip_special_tokens=*/true));
  EXPECT_EQ(joined, text);
  // The hieroglyphs' bytes span tokens: some token completes no character on its own.
  EXPECT_TRUE(some_token_gave_nothing);
}

TEST(TextStreamer, HoldsBackWhatAStopStringMayStillCut) {
  const std::string text = "The answer is 42. END of story";
  const std::string cut = text.substr(0, text.find("END"));
  const std::vector<TokenId> tokens = qwen3().encode(text);
  TextStreamer streamer(qwen3(), {"END", "never"});
  std::string joined;
  // Tokens as the engine appends them: up to the one that completes the stop string.
  std::vector<TokenId> so_far;
  for (TokenId token : tokens) {
    so_far.push_back(token);
    joined += streamer.append(token);
    // Only text before the stop string is ever sent, even while "E", "EN" are pending.
    EXPECT_EQ(cut.compare(0, joined.size(), joined), 0) << joined;
    if (qwen3().decode(so_far).find("END") != std::string::npos) break;
  }
  joined += streamer.finish(cut);
  EXPECT_EQ(joined, cut);
}

TEST(TextStreamer, SendsNothingPastAStopStringThatArrivesInsideALongToken) {
  // One token completes the stop string and carries text after it.
  const std::vector<TokenId> tokens = qwen3().encode("Hello world");
  ASSERT_EQ(tokens.size(), 2u);
  TextStreamer streamer(qwen3(), {"o w"});
  std::string joined = streamer.append(tokens[0]);
  joined += streamer.append(tokens[1]);
  EXPECT_EQ(joined, "Hell");
  joined += streamer.finish("Hell");
  EXPECT_EQ(joined, "Hell");
}

TEST(TextStreamer, SkipsSpecialTokensAsTheFinalTextDoes) {
  std::vector<TokenId> tokens = qwen3().encode("Hello there");
  tokens.push_back(*qwen3().token_to_id("<|im_end|>"));
  TextStreamer streamer(qwen3(), {});
  std::string joined;
  for (TokenId token : tokens) joined += streamer.append(token);
  joined += streamer.finish(qwen3().decode(tokens, /*skip_special_tokens=*/true));
  EXPECT_EQ(joined, "Hello there");
}

}  // namespace
}  // namespace aspen::serve
