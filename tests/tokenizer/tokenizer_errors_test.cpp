// Bad input and unsupported tokenizer.json features must raise aspen::Error naming
// the input, never produce silently different ids.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "aspen/tokenizer/tokenizer.h"
#include "aspen/util/error.h"
#include "aspen/util/file.h"

namespace aspen::tokenizer {
namespace {

nlohmann::json tiny_json() {
  return nlohmann::json::parse(
      read_file(ASPEN_SOURCE_DIR "/tests/tokenizer/data/tiny_tokenizer.json"));
}

// Loads `spec` and returns the aspen::Error message ("" when loading succeeded).
std::string load_error(const nlohmann::json& spec) {
  try {
    Tokenizer::from_json(spec.dump(), "tiny.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TokenizerErrors, InvalidUtf8InputThrows) {
  const Tokenizer tokenizer = Tokenizer::from_json(tiny_json().dump(), "tiny.json");
  for (const std::string bad : {"ab\xC3", "\x80", "a\xED\xA0\x80", "\xC0\xAF", "ok\xF5\x80"}) {
    EXPECT_THROW(tokenizer.encode(bad), Error);
  }
  EXPECT_THROW(tokenizer.encode_batch({"fine", "bad\xFF"}, 2), Error);
  try {
    tokenizer.encode("abc\xFF");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("byte 3"), std::string::npos) << e.what();
  }
}

TEST(TokenizerErrors, UnsupportedSectionsAreRejectedWithTheirKey) {
  auto spec = tiny_json();
  spec["normalizer"] = {{"type", "Lowercase"}};
  EXPECT_NE(load_error(spec).find("Lowercase"), std::string::npos);

  spec = tiny_json();
  spec["pre_tokenizer"] = {{"type", "Whitespace"}};
  EXPECT_NE(load_error(spec).find("Whitespace"), std::string::npos);

  spec = tiny_json();
  spec["pre_tokenizer"] = nullptr;
  EXPECT_NE(load_error(spec).find("ByteLevel"), std::string::npos);

  spec = tiny_json();
  spec["model"]["type"] = "WordPiece";
  EXPECT_NE(load_error(spec).find("BPE"), std::string::npos);

  spec = tiny_json();
  spec["model"]["merges"].push_back("a zz");
  EXPECT_NE(load_error(spec).find("merges[4]"), std::string::npos);

  spec = tiny_json();
  spec["truncation"] = {{"max_length", 8}};
  EXPECT_NE(load_error(spec).find("truncation"), std::string::npos);

  spec = tiny_json();
  spec["decoder"] = {{"type", "WordPiece"}};
  EXPECT_NE(load_error(spec).find("decoder"), std::string::npos);
}

TEST(TokenizerErrors, AddedTokenIdsMustBeThoseHfAssigns) {
  auto spec = tiny_json();
  spec["added_tokens"][0]["id"] = 30;  // HF would give "<s>" id 15
  EXPECT_NE(load_error(spec).find("would assign it id 15"), std::string::npos);
  spec = tiny_json();
  spec["added_tokens"][0]["content"] = "abc";  // in the vocab as 5
  EXPECT_NE(load_error(spec).find("id 5"), std::string::npos);
}

TEST(TokenizerErrors, BadJsonAndMissingFileNameTheInput) {
  EXPECT_NE(std::string([] {
              try {
                Tokenizer::from_json("{not json", "broken.json");
              } catch (const Error& e) {
                return std::string(e.what());
              }
              return std::string();
            }())
                .find("broken.json"),
            std::string::npos);
  EXPECT_THROW(Tokenizer::from_file("/nonexistent/dir/tokenizer.json"), Error);
}

// Fuzzer finding (fuzz/tokenizer_fuzz.cpp): a string where a boolean belongs, reached
// through a "Regex" Split pre-tokenizer, let nlohmann::json::type_error escape.
TEST(TokenizerErrors, WrongJsonTypeInRegexSplitIsAnAspenError) {
  auto spec = tiny_json();
  spec["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"Regex", "\\s+"}}}, {"behavior", "Isolated"},
         {"invert", "no"}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  EXPECT_NE(load_error(spec).find("wrong JSON type"), std::string::npos);
  spec = tiny_json();
  spec["model"]["dropout"] = "0.1";
  EXPECT_NE(load_error(spec).find("wrong JSON type"), std::string::npos);
}

// Fuzzer finding: a declared vocab id of 10^8 in a tiny file sized the id tables to
// 10^8 entries (~3 GB). Ids are bounded by the number of entries (tokenizer.h).
TEST(TokenizerErrors, HugeVocabIdIsRefusedBeforeAllocating) {
  auto spec = tiny_json();
  spec["model"]["vocab"]["far"] = 100000000;
  const std::string error = load_error(spec);
  EXPECT_NE(error.find("100000000"), std::string::npos) << error;
  EXPECT_NE(error.find("model.vocab"), std::string::npos) << error;
  // A small gap stays accepted (no added tokens, whose ids would follow the vocab).
  spec = tiny_json();
  spec["added_tokens"] = nlohmann::json::array();
  spec["model"]["vocab"]["near"] = 100;
  EXPECT_EQ(load_error(spec), "");
}

// Deeply nested JSON (100,000 levels) is refused while parsing, naming the file.
TEST(TokenizerErrors, DeeplyNestedJsonIsAnAspenError) {
  const std::string deep = "{\"normalizer\":" + std::string(100000, '[') + "]}";
  try {
    Tokenizer::from_json(deep, "deep.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nested deeper than 512"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("deep.json"), std::string::npos) << e.what();
  }
}

// HF tokenizers reads a repeated vocab key as the last of its values; which one was
// meant is unknowable, so the file is refused, naming the token and the line.
TEST(TokenizerErrors, ATokenListedTwiceInTheVocabIsRefusedNamingItsLine) {
  std::string text = tiny_json().dump(2);  // one vocab entry per line, as HF writes it
  const size_t vocab = text.find("\"vocab\": {\n");
  ASSERT_NE(vocab, std::string::npos);
  const size_t first_entry = text.find('\n', vocab) + 1;
  const size_t line_end = text.find('\n', first_entry) + 1;
  const std::string entry = text.substr(first_entry, line_end - first_entry);  // "x": 9,
  const size_t quote = entry.find('"');
  const std::string key = entry.substr(quote, entry.find("\":") + 1 - quote);  // "x"
  text.insert(line_end, entry);  // the same token again, next line
  const auto line = 1 + std::count(text.begin(), text.begin() + line_end, '\n');
  try {
    Tokenizer::from_json(text, "tiny.json");
    FAIL() << "a token listed twice was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.input(), "tiny.json");
    EXPECT_NE(e.problem().find("duplicate key " + key), std::string::npos) << e.what();
    EXPECT_NE(e.problem().find("line " + std::to_string(line)), std::string::npos) << e.what();
  }
}

TEST(TokenizerErrors, TwoTokensWithOneIdAreRefused) {
  auto spec = tiny_json();
  spec["model"]["vocab"]["zz"] = spec["model"]["vocab"]["b"];
  const std::string error = load_error(spec);
  EXPECT_NE(error.find("\"b\" and \"zz\" both have id 1"), std::string::npos) << error;
  EXPECT_NE(error.find("tiny.json: model.vocab"), std::string::npos) << error;
}

}  // namespace
}  // namespace aspen::tokenizer
