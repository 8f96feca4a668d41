// `aspen tokenize --tokenizer PATH [--decode]`
//   encode: stdin one JSON string per line -> stdout one JSON array of ids per line.
//           No special tokens are added; special tokens inside the text are recognised
//           (HF encode(text, add_special_tokens=False)).
//   decode: stdin one JSON array of ids per line -> stdout one JSON string per line.
#include <iostream>

#include "aspen/cli/command.h"
#include "aspen/cli/imports.h"
#include "aspen/io/jsonl.h"
#include "aspen/tokenizer/tokenizer.h"
#include "aspen/util/error.h"

namespace aspen::cli {
// Named, not anonymous: the CLI is a unity build (one namespace per subcommand file).
namespace tokenize_command {

struct TokenizeOptions {
  std::string tokenizer_path;
  bool decode = false;
};

std::vector<TokenId> parse_ids(const nlohmann::json& value, const std::string& location) {
  check_input(value.is_array(), "expected a JSON array of token ids", location);
  std::vector<TokenId> ids;
  ids.reserve(value.size());
  for (const auto& id : value) {
    check_input(id.is_number_integer(), "token ids must be integers, got " + id.dump(), location);
    ids.push_back(id.get<TokenId>());
  }
  return ids;
}

int run_tokenize(const TokenizeOptions& options) {
  const Tokenizer tokenizer = Tokenizer::from_file(options.tokenizer_path);
  JsonlReader reader(std::cin, "stdin");
  nlohmann::json line;
  while (reader.next(line)) {
    try {
      if (options.decode) {
        write_jsonl(std::cout, tokenizer.decode(parse_ids(line, reader.location())));
      } else {
        check_input(line.is_string(), "expected a JSON string", reader.location());
        write_jsonl(std::cout, tokenizer.encode(line.get_ref<const std::string&>()));
      }
    } catch (const Error& e) {
      // Errors from the tokenizer name the text, not the line; add the line.
      if (e.input().rfind("stdin", 0) == 0) throw;
      throw Error(e.what(), reader.location());
    }
  }
  return 0;
}

void setup(CLI::App& root) {
  auto options = std::make_shared<TokenizeOptions>();
  CLI::App* command = root.add_subcommand(
      "tokenize", "Encode JSON strings from stdin to id arrays (or --decode the reverse)");
  command->add_option("--tokenizer", options->tokenizer_path, "tokenizer.json or model directory")
      ->required();
  command->add_flag("--decode", options->decode, "Read id arrays, write strings");
  on_run(command, [options] { return run_tokenize(*options); });
}

ASPEN_REGISTER_COMMAND(10, setup);

}  // namespace tokenize_command
}  // namespace aspen::cli
