// Bad input and unsupported tokenizer.json features must raise aspen::Error naming
// the input, never produce silently different ids.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "aspen/tokenizer/tokenizer.h"
#include "aspen/util/error.h"
#include "aspen/util/file.h"

namespace aspen {
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

}  // namespace
}  // namespace aspen
