// `aspen tokenizer-train --vocab-size N --out tokenizer.json [--special TOKEN ...] FILE...`
//   Trains a byte-level BPE tokenizer (Qwen pipeline, HF-compatible tokenizer.json) on the
//   corpus files: plain text with one document per line, or .jsonl whose lines are JSON
//   strings or objects with a "text" field. Special tokens get ids 0..k-1, in the order
//   given. Prints one JSON summary line to stdout.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "aspen/cli/command.h"
#include "aspen/cli/imports.h"
#include "aspen/tokenizer/bpe_trainer.h"
#include "aspen/util/error.h"
#include "aspen/util/file.h"
#include "aspen/util/log.h"

namespace aspen::cli {
// Named, not anonymous: the CLI is a unity build (one namespace per subcommand file).
namespace tokenizer_train_command {

struct TrainOptions {
  int64_t vocab_size = 0;
  std::string out_path;
  std::vector<std::string> special_tokens;
  uint64_t min_frequency = 0;
  std::vector<std::string> files;
};

int run_train(const TrainOptions& options) {
  BpeTrainerOptions trainer_options;
  trainer_options.vocab_size = options.vocab_size;
  trainer_options.special_tokens = options.special_tokens;
  trainer_options.min_frequency = options.min_frequency;
  BpeTrainer trainer(trainer_options);  // validates the vocab size before reading anything
  // And the output, before the corpus is read (util/file.h: a device or FIFO is refused).
  check_output_file(options.out_path, "--out");
  int64_t documents = 0;
  for (const std::string& file : options.files) {
    const int64_t fed = trainer.feed_file(file);
    log_info("tokenizer-train: ", file, ": ", fed, " documents");
    documents += fed;
  }
  check_input(documents > 0, "the corpus has no documents", "tokenizer-train FILE arguments");
  const std::string json_text = trainer.train();
  write_file_atomic(options.out_path, json_text);
  const auto written = nlohmann::json::parse(json_text);
  std::cout << nlohmann::json({{"out", options.out_path},
                               {"documents", documents},
                               {"distinct_pre_tokens", trainer.num_words()},
                               {"vocab_size", written["model"]["vocab"].size()},
                               {"merges", written["model"]["merges"].size()}})
                   .dump()
            << "\n";
  return 0;
}

void setup(CLI::App& root) {
  auto options = std::make_shared<TrainOptions>();
  CLI::App* command = root.add_subcommand(
      "tokenizer-train", "Train a byte-level BPE tokenizer.json (Qwen pipeline) on text files");
  command
      ->add_option("--vocab-size", options->vocab_size,
                   "Vocabulary size including special tokens and the 256 byte characters")
      ->required();
  command->add_option("--out", options->out_path, "Where to write tokenizer.json")->required();
  command
      ->add_option("--special", options->special_tokens,
                   "Special token, e.g. <|endoftext|> (repeatable; ids follow this order)")
      ->allow_extra_args(false);
  command->add_option("--min-frequency", options->min_frequency,
                      "Never merge a pair seen fewer times than this");
  command->add_option("files", options->files, "Corpus files (.txt: one document per line; .jsonl)")
      ->required();
  on_run(command, [options] { return run_train(*options); });
}

ASPEN_REGISTER_COMMAND(40, setup);

}  // namespace tokenizer_train_command
}  // namespace aspen::cli
