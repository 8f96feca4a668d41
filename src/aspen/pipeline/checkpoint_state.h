// A checkpoint's state.json: everything a resumed run reads besides tensors, checked
// in full when it is read, so that a corrupt or hand-edited file is refused with an
// error naming it instead of reaching an index or a restore() half-way through.
//
//   {"iteration": N >= 1,
//    "schedule": {"evals":    {"initial": a, "before": a, "after": a},  a in [0, 1]
//                 "schedule": ENGINE}}
//   ENGINE, as IterationEngine::state() writes it:
//     {"prompts": PROMPTS (PromptSource::check_state),
//      "pending": [[group_id, example], ...]   groups admitted, not trained
//      "version", "samples", "trained_tokens": integers >= 0, version == N
//                                              (one policy update per iteration),
//      "consumed_groups", "refilled_groups":   integers >= 0, both or neither
//                                              (neither: written before the engine),
//      "kl_reward_coef": finite >= 0}
//   Pending groups must be open groups of PROMPTS with the same example.
// Errors: aspen::Error naming `source` and the field. Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "aspen/pipeline/imports.h"

namespace aspen::pipeline {

struct CheckpointState {
  int64_t iteration = 0;
  nlohmann::json schedule;  // {"evals": ..., "schedule": ENGINE}, checked
};

// `directory_iteration`: the N of the checkpoint directory iter_NNNNNN that holds the
// file, which "iteration" must equal (checked first: the clearest word on a state
// edited or copied from another checkpoint).
CheckpointState read_checkpoint_state(std::string_view text, const std::string& source,
                                      std::optional<int64_t> directory_iteration = std::nullopt);

}  // namespace aspen::pipeline
