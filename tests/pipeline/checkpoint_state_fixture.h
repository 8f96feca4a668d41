// A checkpoint's schedule state as the iteration engine writes it ({"evals",
// "schedule"}; pipeline/checkpoint_state.h): for tests that save and load checkpoints
// or check the reader's refusals. `samples` marks the state so a test can tell which
// one it read back; `version` must equal the iteration of the checkpoint it goes into.
#pragma once

#include <nlohmann/json.hpp>

#include "aspen/pipeline/prompt_source.h"

namespace aspen::testing {

using namespace aspen::pipeline;

inline nlohmann::json example_schedule_state(int64_t samples = 16, int64_t version = 2) {
  PromptSource source(4, 7);
  const std::vector<PromptGroup> drawn = source.next(2);
  source.close(drawn[0].group_id);
  const nlohmann::json engine = {{"prompts", source.state()},
                                 {"pending", {{drawn[1].group_id, drawn[1].example}}},
                                 {"version", version},
                                 {"samples", samples},
                                 {"trained_tokens", 300},
                                 {"consumed_groups", 1},
                                 {"refilled_groups", 0},
                                 {"kl_reward_coef", 0.01}};
  return {{"evals", {{"initial", 0.25}, {"before", 0.5}, {"after", 0.75}}},
          {"schedule", engine}};
}

}  // namespace aspen::testing
