// `aspen tokenize` against HF tokenizers (the PyPI package, run by
// tools/python/tokenizer_oracle.py) with the real Qwen3 tokenizer.json, on text written
// to be hard: specials inside text, CJK, emoji sequences, CRLF, digit runs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "support/oracles.h"

namespace aspen::cli {
namespace {

using testing::run_command;

const std::string kFixture = testing::qwen3_tokenizer_json();

// The HF oracle in `mode` (encode | decode) on the Qwen3 tokenizer.
std::string oracle(const std::string& mode) {
  return "'" + testing::python() + "' '" + testing::oracle_script("tokenizer_oracle.py") + "' " +
         mode + " '" + kFixture + "'";
}

std::string sample_lines() {
  const std::vector<std::string> texts = {
      "Hello world! <|im_start|>user\nWhat's 12345678 + 9?<|im_end|>",
      "你好，世界。東京は晴れ。",
      "👩‍👩‍👧‍👦 family, 🇯🇵 flag, e\u0301 combining",
      "line one\r\nline two\r\n\ttabbed   spaced  \n\n",
      "def f(x):\n    return x**2  # 'QUOTE' DON'T we'LL\n",
      "<think>\n\n</think>\n\n<|endoftext|><|endoftext|>tail",
      "   leading and trailing   "};
  std::string lines;
  for (const auto& t : texts) lines += nlohmann::json(t).dump() + "\n";
  return lines;
}

TEST(TokenizeCommand, MatchesHuggingFaceTokenizersAndRoundTrips) {
  const std::string input = sample_lines();
  const auto ours = run_command(testing::aspen_cli() + " tokenize --tokenizer " + kFixture, input);
  ASSERT_EQ(ours.exit_code, 0) << ours.err;
  const auto encoded = run_command(oracle("encode"), input);
  ASSERT_EQ(encoded.exit_code, 0) << "the HF oracle must run (scripts/setup installs it): "
                                  << encoded.err;
  EXPECT_EQ(ours.out, encoded.out);

  const auto decoded =
      run_command(testing::aspen_cli() + " tokenize --decode --tokenizer " + kFixture, ours.out);
  ASSERT_EQ(decoded.exit_code, 0) << decoded.err;
  // Decoding gives the NFC-normalised text back, exactly as HF does.
  std::string oracle_input;  // the oracle's decode reads [ids, skip_special] per line
  std::istringstream id_lines(ours.out);
  for (std::string line; std::getline(id_lines, line);) oracle_input += "[" + line + ", false]\n";
  const auto oracle_decoded = run_command(oracle("decode"), oracle_input);
  ASSERT_EQ(oracle_decoded.exit_code, 0) << oracle_decoded.err;
  EXPECT_EQ(decoded.out, oracle_decoded.out);
  EXPECT_NE(decoded.out, input);  // the combining accent came back composed
}

TEST(TokenizeCommand, BadInputGetsOneClearLine) {
  const auto not_string =
      run_command(testing::aspen_cli() + " tokenize --tokenizer " + kFixture, "\"ok\"\n42\n");
  EXPECT_EQ(not_string.exit_code, 1);
  EXPECT_NE(not_string.err.find("stdin: line 2"), std::string::npos) << not_string.err;
  const auto bad_id = run_command(
      testing::aspen_cli() + " tokenize --decode --tokenizer " + kFixture, "[1, 99999999]\n");
  EXPECT_EQ(bad_id.exit_code, 1);
  EXPECT_NE(bad_id.err.find("line 1"), std::string::npos) << bad_id.err;
  const auto missing =
      run_command(testing::aspen_cli() + " tokenize --tokenizer /no/such/tokenizer.json", "");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("/no/such/tokenizer.json"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace aspen::cli
