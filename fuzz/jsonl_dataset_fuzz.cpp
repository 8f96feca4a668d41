// JSONL prompt datasets (tasks/jsonl_dataset.h). Input: the JSONL text; its first byte
// also picks the options (chat template, id and verifier fields, system prompt).
// Checks: loading works or throws aspen::Error; a loaded dataset has one example per
// non-blank line with distinct ids.
#include <optional>
#include <set>
#include <sstream>

#include "aspen/tasks/jsonl_dataset.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t choice = data[0];
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  static const aspen::tokenizer::ChatTemplate templates[] = {aspen::tokenizer::ChatTemplate::builtin("chatml"),
                                                  aspen::tokenizer::ChatTemplate::builtin("qwen2.5"),
                                                  aspen::tokenizer::ChatTemplate::builtin("qwen3")};
  aspen::tasks::JsonlDatasetOptions options;
  if (choice & 4) options.id_field = "id";
  if (choice & 8) options.verifier_field = "verifier";
  if (choice & 16) options.system_prompt = "Be brief.";
  if (choice & 32) options.prompt_field = "data.prompt";
  if (choice & 64) options.answer_field = "reward_model.ground_truth";
  options.enable_thinking = (choice & 128) != 0;
  const aspen::tokenizer::ChatTemplate* chat = (choice & 3) == 3 ? nullptr : &templates[choice & 3];
  ASPEN_FUZZ_CONTRACT({
    std::istringstream in(text);
    const auto examples = aspen::tasks::read_jsonl_dataset(in, "fuzz.jsonl", options, chat);
    std::set<std::string> ids;
    for (const auto& example : examples) ids.insert(example.id);
    aspen::fuzz::require(ids.size() == examples.size(), "example ids are distinct");
  });
  return 0;
}
