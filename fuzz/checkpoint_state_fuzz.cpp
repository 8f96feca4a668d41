// A checkpoint's state.json (pipeline/checkpoint_state.h) as `aspen train --resume`
// reads it. Checks: reading works or raises aspen::Error; a state that reads restores
// a PromptSource of its size without error, which then draws prompts of that dataset.
#include "aspen/pipeline/checkpoint_state.h"
#include "aspen/pipeline/prompt_source.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  aspen::pipeline::CheckpointState state;
  try {
    state = aspen::pipeline::read_checkpoint_state(text, "fuzz/state.json");
  } catch (const aspen::Error&) {
    return 0;
  } catch (const std::exception& e) {
    aspen::fuzz::defect(std::string("read_checkpoint_state let a non-aspen exception escape: ") +
                        e.what());
  }
  const nlohmann::json& prompts = state.schedule.at("schedule").at("prompts");
  const int64_t examples = prompts.at("num_examples").get<int64_t>();
  aspen::pipeline::PromptSource source(examples, 0);
  try {
    source.restore(prompts);
  } catch (const aspen::Error& e) {
    aspen::fuzz::defect(std::string("a checked state does not restore: ") + e.what());
  }
  // Drawing past the epoch reshuffles num_examples entries: only for small datasets.
  const int64_t draws = examples <= 4096 ? 3 : 0;
  for (const aspen::pipeline::PromptGroup& group : source.next(draws)) {
    aspen::fuzz::require(group.example >= 0 && group.example < examples,
                         "a drawn example is in range");
  }
  return 0;
}
