#include "bench/tokenizer_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "aspen/tokenizer/tokenizer.h"
#include "aspen/util/seconds_since.h"
#include "bench/imports.h"

namespace aspen::bench {
namespace {

// Public-domain style English prose; the generator below recombines these sentences.
constexpr const char* kSentences[] = {
    "It was a bright cold day in April, and the clocks were striking thirteen.",
    "The river wound slowly through the valley, past orchards heavy with late fruit.",
    "She had never seen the sea before, and the sound of it frightened her a little.",
    "Nobody in the village could remember when the old mill had last turned.",
    "He folded the letter twice, put it in his coat, and walked out into the rain.",
    "The committee met on Tuesday to discuss the budget for the coming year.",
    "Children ran along the beach, shouting at the gulls that wheeled overhead.",
    "By the time the train reached the city, the sun had already set behind the hills.",
    "There is nothing more deceptive than an obvious fact, as the detective liked to say.",
    "Researchers measured the temperature every hour for three weeks in a row.",
    "The library was quiet except for the scratching of pens and the ticking clock.",
    "Whatever the weather, the market opened at seven and closed at noon.",
    "They argued about politics, music, and the best way to cook potatoes.",
    "Her grandmother's recipe called for butter, flour, sugar, and a pinch of salt.",
    "In the morning the fog lifted, revealing a ship anchored just beyond the harbor.",
    "Most of the questions on the exam were easier than the students had feared.",
    "I don't think we'll finish before dark, but it's worth trying anyway.",
    "The engine coughed twice, sputtered, and finally roared back to life.",
    "A small dog followed them all the way home and refused to leave.",
    "Prices had risen sharply since the spring, and everyone was talking about it.",
};

// Deterministic prose of about `target_bytes`: sentences picked by a fixed LCG,
// grouped into paragraphs of 3..8 sentences separated by blank lines.
std::vector<std::string> make_paragraphs(size_t target_bytes) {
  constexpr size_t kCount = sizeof(kSentences) / sizeof(kSentences[0]);
  uint64_t state = 0x2545F4914F6CDD1DULL;
  auto next = [&state] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<size_t>(state >> 33);
  };
  std::vector<std::string> paragraphs;
  size_t total = 0;
  while (total < target_bytes) {
    std::string paragraph;
    const size_t sentences = 3 + next() % 6;
    for (size_t i = 0; i < sentences; ++i) {
      if (i > 0) paragraph += ' ';
      paragraph += kSentences[next() % kCount];
    }
    paragraph += "\n\n";
    total += paragraph.size();
    paragraphs.push_back(std::move(paragraph));
  }
  return paragraphs;
}

}  // namespace

nlohmann::json run_tokenizer_bench(const std::string& tokenizer_path, double min_seconds) {
  const Tokenizer tokenizer = Tokenizer::from_file(tokenizer_path);
  const std::vector<std::string> paragraphs = make_paragraphs(400 * 1024);
  std::string text;
  for (const auto& paragraph : paragraphs) text += paragraph;
  const double megabytes = static_cast<double>(text.size()) / 1e6;

  auto start = std::chrono::steady_clock::now();
  const size_t tokens = tokenizer.encode(text).size();  // cold word cache
  const double cold_seconds = seconds_since(start);

  size_t passes = 0;
  start = std::chrono::steady_clock::now();
  double elapsed = 0;
  do {
    if (tokenizer.encode(text).size() != tokens) break;  // deterministic; guards the optimiser
    ++passes;
    elapsed = seconds_since(start);
  } while (elapsed < min_seconds);

  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  size_t batch_passes = 0;
  size_t batch_tokens = 0;
  start = std::chrono::steady_clock::now();
  double batch_elapsed = 0;
  do {
    for (const auto& ids : tokenizer.encode_batch(paragraphs, threads)) {
      batch_tokens += ids.size();
    }
    ++batch_passes;
    batch_elapsed = seconds_since(start);
  } while (batch_elapsed < min_seconds);

  return {
      {"mb_per_s", megabytes * passes / elapsed},
      {"tokens_per_s", static_cast<double>(tokens * passes) / elapsed},
      {"bytes", text.size()},
      {"tokens", tokens},
      {"threads", 1},
      {"seconds", elapsed},
      {"passes", passes},
      {"cold_mb_per_s", megabytes / cold_seconds},
      {"batch",
       {{"threads", threads},
        {"mb_per_s", megabytes * batch_passes / batch_elapsed},
        {"tokens_per_s", static_cast<double>(batch_tokens) / batch_elapsed}}},
  };
}

}  // namespace aspen::bench
