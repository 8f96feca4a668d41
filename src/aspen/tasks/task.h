// Task: a built-in verifiable task that generates its own prompts (arithmetic, countdown),
// for smoke-testing the RL loop on a tiny model without any dataset.
//
// Contract: make_split is deterministic in (split, count, seed) and train and eval splits
// are disjoint for all seeds (split_assignment.h); every example's sft_target scores the
// verifier's full reward under make_verifier(). Examples carry raw prompt text (no chat
// template): the demo SFTs a tiny model on prompt + sft_target + end-of-text.
// Thread safety: implementations are immutable after construction; all methods are const
// and may run concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aspen/reward/verifier.h"
#include "aspen/tasks/imports.h"
#include "aspen/tasks/task_example.h"

namespace aspen::tasks {

class Task {
 public:
  virtual ~Task() = default;

  virtual std::string name() const = 0;
  // `count` distinct examples of `split`. Throws aspen::Error when the configured problem
  // space is too small for `count`.
  virtual std::vector<TaskExample> make_split(Split split, int64_t count, uint64_t seed) const = 0;
  // The verifier kind and options that grade this task's responses.
  virtual std::string verifier_name() const = 0;
  virtual nlohmann::json verifier_options() const = 0;
  // The reference response for supervised warm-up, e.g. "85" or "(3+5)*7".
  virtual std::string sft_target(const TaskExample& example) const = 0;
  // The assistant turns of a demonstration for supervised warm-up of a multi-turn run
  // (rollout.environment): each turn's text as the model would write it, tool calls in
  // the Qwen format; the environment answers every turn but the last. Default: the
  // single turn sft_target.
  virtual std::vector<std::string> demonstration_turns(const TaskExample& example) const {
    return {sft_target(example)};
  }

  // make_verifier(verifier_name(), verifier_options()).
  std::unique_ptr<Verifier> make_verifier() const;
};

}  // namespace aspen::tasks
