// BpeTrainer: pinned small cases for the merge order (counts, then HF's tie-break on pair
// ids), and two oracles from HF tokenizers (Rust, through the PyPI binding and
// tools/python/tokenizer_oracle.py): HF trained on the same corpus must produce the same
// merges, and HF loading our tokenizer.json must encode like aspen's Tokenizer.
// The oracle tests fail (never skip) when the oracle's Python or script is missing.
#include "aspen/tokenizer/bpe_trainer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "aspen/tokenizer/tokenizer.h"
#include "aspen/util/error.h"
#include "support/oracles.h"

namespace aspen::tokenizer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A deterministic corpus with repeated words (so merges have real counts), contractions,
// digits, punctuation runs, several spaces, newlines inside documents, accented letters
// in decomposed form (NFC must compose them), CJK and an emoji.
std::vector<std::string> corpus() {
  const std::vector<std::string> words = {
      "the",  "cat",  "sat",     "on",    "mat",    "don't",  "we'll",  "Hello",   "world",
      "1234", "3.14", "x+y=z",   "(a,b)", "café",   "naïve",  "東京",   "数学",    "🙂",
      "  ",   "!!!",  "foo_bar", "I'M",   "reward", "policy", "tokens", "rollout", "GRPO"};
  // Invented words from syllables give the merge loop thousands of distinct pairs.
  const std::vector<std::string> syllables = {"ka",  "lo", "mi", "tra", "ven", "sho", "qu", "ix",
                                              "ble", "ré", "ño", "zh",  "ang", "er",  "th", "ß"};
  std::vector<std::string> docs;
  uint32_t state = 12345;
  auto next = [&state] {
    state = state * 1103515245u + 12345u;
    return (state >> 8) & 0xFFFF;
  };
  for (int d = 0; d < 160; ++d) {
    std::string doc;
    const int length = 3 + static_cast<int>(next() % 12);
    for (int w = 0; w < length; ++w) {
      if (w > 0) doc += next() % 9 == 0 ? "\n" : " ";
      if (next() % 2 == 0) {
        doc += words[next() % words.size()];
        continue;
      }
      const int parts = 1 + static_cast<int>(next() % 4);
      for (int p = 0; p < parts; ++p) doc += syllables[next() % syllables.size()];
    }
    docs.push_back(doc);
  }
  return docs;
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("aspen_bpe_test_" + std::to_string(getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name, const std::string& content) const {
    const fs::path p = path / name;
    std::ofstream(p, std::ios::binary) << content;
    return p.string();
  }
};

// Runs the oracle script; returns its exit status and puts its output in `output`.
int run_oracle(const std::string& args, const TempDir& dir, std::string* output) {
  const std::string python = testing::python();
  const std::string script = testing::oracle_script("tokenizer_oracle.py");
  EXPECT_TRUE(fs::exists(python)) << "no oracle Python at " << python << " (run scripts/setup)";
  EXPECT_TRUE(fs::exists(script)) << "missing oracle script " << script;
  const std::string log = (dir.path / "oracle.log").string();
  const std::string command = "'" + python + "' '" + script + "' " + args + " > '" + log + "' 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  *output = text.str();
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::vector<std::pair<std::string, std::string>> merges_of(const json& tokenizer_json) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& merge : tokenizer_json["model"]["merges"]) {
    if (merge.is_string()) {  // "left right" form
      const std::string s = merge.get<std::string>();
      const size_t space = s.find(' ');
      out.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else {
      out.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    }
  }
  return out;
}

BpeTrainerOptions options(int64_t vocab_size, std::vector<std::string> specials = {}) {
  BpeTrainerOptions o;
  o.vocab_size = vocab_size;
  o.special_tokens = std::move(specials);
  return o;
}

constexpr int64_t kExhaust = int64_t{1} << 30;  // larger than any reachable vocabulary

TEST(BpeTrainerTest, MergesMostFrequentPairFirst) {
  const json j = json::parse(train_bpe_tokenizer({"abab"}, options(kExhaust)));
  // (a,b) occurs twice, (b,a) once; then "ab ab" is the only pair left.
  const std::vector<std::pair<std::string, std::string>> expected = {{"a", "b"}, {"ab", "ab"}};
  EXPECT_EQ(merges_of(j), expected);
  EXPECT_EQ(j["model"]["vocab"].size(), 256u + 2u);
  EXPECT_EQ(j["model"]["vocab"]["ab"], 256);
  EXPECT_EQ(j["model"]["vocab"]["abab"], 257);
}

TEST(BpeTrainerTest, TiesGoToTheSmallestPairIds) {
  // Pieces "xy" and " yx" -> "xy", "Ġyx": three pairs, each seen once. Alphabet ids follow
  // code points (x < y < Ġ=U+0120), so (x,y) < (y,x) < (Ġ,y); merging (y,x) then turns
  // (Ġ,y) into (Ġ,yx).
  const json j = json::parse(train_bpe_tokenizer({"xy yx"}, options(kExhaust)));
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"x", "y"}, {"y", "x"}, {"Ġ", "yx"}};
  EXPECT_EQ(merges_of(j), expected);
}

TEST(BpeTrainerTest, StopsAtVocabSizeWithSpecialTokensFirst) {
  const std::vector<std::string> specials = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  const int64_t vocab_size = 256 + 3 + 120;
  const json j = json::parse(train_bpe_tokenizer(corpus(), options(vocab_size, specials)));
  EXPECT_EQ(static_cast<int64_t>(j["model"]["vocab"].size()), vocab_size);
  EXPECT_GE(j["model"]["merges"].size(), 120u);
  ASSERT_EQ(j["added_tokens"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(j["added_tokens"][i]["id"], i);
    EXPECT_EQ(j["added_tokens"][i]["content"], specials[i]);
    EXPECT_EQ(j["added_tokens"][i]["special"], true);
    EXPECT_EQ(j["model"]["vocab"][specials[i]], i);
  }
  EXPECT_EQ(j["normalizer"]["type"], "NFC");
  EXPECT_EQ(j["pre_tokenizer"]["pretokenizers"][0]["behavior"], "Isolated");
  EXPECT_EQ(j["decoder"]["type"], "ByteLevel");
}

TEST(BpeTrainerTest, TokenizerLoadsAndRoundTrips) {
  const std::vector<std::string> specials = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  const Tokenizer tokenizer = Tokenizer::from_json(
      train_bpe_tokenizer(corpus(), options(256 + 3 + 200, specials)), "trained");
  EXPECT_EQ(tokenizer.vocab_size(), 256 + 3 + 200);
  std::vector<std::string> texts = corpus();
  texts.push_back("unseen words: zebra, Ωmega, ½ and tabs\there");
  for (const std::string& text : texts) {
    EXPECT_EQ(tokenizer.decode(tokenizer.encode(text)), text);
  }
  const std::vector<TokenId> ids = tokenizer.encode("<|im_start|>user\nhi<|im_end|>");
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(ids.back(), 2);
  EXPECT_TRUE(tokenizer.is_special(0));
  // Frequent corpus words end up as single tokens.
  EXPECT_EQ(tokenizer.encode(" rollout").size(), 1u);
}

TEST(BpeTrainerTest, MergesEqualHfTrainerOnSameCorpus) {
  TempDir dir;
  // HF trains from files line by line and keeps each line's "\n"; feed ours the same text.
  std::string corpus_text;
  std::vector<std::string> lines;
  for (const std::string& doc : corpus()) {
    std::string line = doc;
    for (char& c : line) c = c == '\n' ? ' ' : c;
    corpus_text += line + "\n";
    lines.push_back(line + "\n");
  }
  const json ours = json::parse(train_bpe_tokenizer(lines, options(kExhaust)));
  json skeleton = ours;
  skeleton["model"]["vocab"] = json::object();
  skeleton["model"]["merges"] = json::array();
  const std::string skeleton_path = dir.file("skeleton.json", skeleton.dump());
  const std::string corpus_path = dir.file("corpus.txt", corpus_text);
  const std::string out_path = (dir.path / "hf.json").string();
  std::string output;
  ASSERT_EQ(run_oracle("train '" + skeleton_path + "' '" + corpus_path + "' '" + out_path + "'",
                       dir, &output),
            0)
      << output;
  std::ifstream in(out_path);
  const json hf = json::parse(in);
  const auto hf_merges = merges_of(hf);
  const auto our_merges = merges_of(ours);
  ASSERT_GT(hf_merges.size(), 300u);  // the corpus is big enough to exercise the queue
  ASSERT_EQ(our_merges.size(), hf_merges.size());
  for (size_t i = 0; i < hf_merges.size(); ++i) {
    ASSERT_EQ(our_merges[i], hf_merges[i]) << "first difference at merge rank " << i;
  }
}

TEST(BpeTrainerTest, HfEncodesLikeAspenWithTrainedJson) {
  TempDir dir;
  const std::vector<std::string> specials = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  const std::string text = train_bpe_tokenizer(corpus(), options(256 + 3 + 300, specials));
  const std::string tokenizer_path = dir.file("tokenizer.json", text);
  const Tokenizer tokenizer = Tokenizer::from_json(text, tokenizer_path);
  std::vector<std::string> texts = corpus();
  texts.insert(texts.end(),
               {"<|im_start|>system\nYou are helpful.<|im_end|>\n",
                "Cafe\xCC\x81 (decomposed) vs café", "  leading and trailing  ",
                "I'M sure we'll DON'T 42 3.14159", "新しい東京 🙂🙂", "\n\n\t x"});
  std::string cases;
  for (const std::string& t : texts) {
    cases += json({{"text", t}, {"ids", tokenizer.encode(t)}}).dump() + "\n";
  }
  const std::string cases_path = dir.file("cases.jsonl", cases);
  std::string output;
  EXPECT_EQ(run_oracle("check '" + tokenizer_path + "' '" + cases_path + "'", dir, &output), 0)
      << output;
  EXPECT_NE(output.find("ok " + std::to_string(texts.size())), std::string::npos) << output;
}

TEST(BpeTrainerTest, FeedFileReadsTextAndJsonl) {
  TempDir dir;
  BpeTrainer from_text(options(300));
  EXPECT_EQ(from_text.feed_file(dir.file("a.txt", "hello world\r\n\nhello there\n")), 2);
  BpeTrainer from_jsonl(options(300));
  EXPECT_EQ(from_jsonl.feed_file(
                dir.file("a.jsonl", "\"hello world\"\n\n{\"text\": \"hello there\", \"id\": 3}\n")),
            2);
  EXPECT_EQ(from_text.train(), from_jsonl.train());
  EXPECT_EQ(from_text.num_words(), 3);  // "hello" (twice), " world", " there"
}

TEST(BpeTrainerTest, BadInputsAreErrors) {
  EXPECT_THROW(BpeTrainer(options(255)), Error);
  EXPECT_THROW(BpeTrainer(options(258, {"<a>", "<b>", "<c>"})), Error);
  EXPECT_NO_THROW(BpeTrainer(options(259, {"<a>", "<b>", "<c>"})));
  EXPECT_THROW(BpeTrainer(options(300, {""})), Error);
  BpeTrainer trainer(options(300));
  EXPECT_THROW(trainer.feed("bad \xFF byte"), Error);
  EXPECT_THROW(trainer.feed_file("/nonexistent/corpus.txt"), Error);
  TempDir dir;
  const std::string bad = dir.file("bad.jsonl", "\"ok\"\n{\"content\": \"no text field\"}\n");
  try {
    trainer.feed_file(bad);
    FAIL() << "expected aspen::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.input(), bad + ":2");
  }
}

}  // namespace
}  // namespace aspen::tokenizer
