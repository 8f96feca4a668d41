// CountdownTask: the Countdown game (TinyZero): reach a target with each given number
// exactly once and + - * / ( ). Every target is reachable by construction: a random
// expression tree is built over the drawn numbers (pairs merged with random operators
// until one remains), evaluated exactly, and kept only when its value is an integer in
// [min_target, max_target]; its printout (minimal parentheses) is the reference solution.
//   prompt       "Using the numbers 3, 5, 7, write an equation that equals 56. Use + - * /
//                 and parentheses, and each number exactly once.\n"
//   sft_target   "(3+5)*7"   (or "<answer>(3+5)*7</answer>" with answer_tags)
//   ground truth {"target": 56, "numbers": [3, 5, 7], "solution": "(3+5)*7"}
// graded by the countdown verifier (require_answer_tag = answer_tags).
// Options (JSON, all optional):
//   min_numbers, max_numbers   how many numbers per problem     (default 3, 4; 2..6)
//   min_value, max_value       range of each number             (default 1, 99)
//   min_target, max_target     range of the target              (default 1, 100)
//   answer_tags                ask for <answer>...</answer>     (default false)
//   eval_fraction              share held out for eval          (default 0.1)
// Canonical problem (the id) = sorted numbers and target, so a reordering of the same
// numbers is the same problem and lands in the same split.
// Thread safety: immutable; methods may run concurrently.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aspen/tasks/imports.h"
#include "aspen/tasks/task.h"

namespace aspen::tasks {

class CountdownTask : public Task {
 public:
  // Throws aspen::Error naming "task options (countdown).<key>" for bad options.
  explicit CountdownTask(const nlohmann::json& options = nlohmann::json::object());

  std::string name() const override { return "countdown"; }
  std::vector<TaskExample> make_split(Split split, int64_t count, uint64_t seed) const override;
  std::string verifier_name() const override { return "countdown"; }
  nlohmann::json verifier_options() const override {
    return {{"require_answer_tag", answer_tags_}};
  }
  std::string sft_target(const TaskExample& example) const override;

 private:
  int64_t min_numbers_ = 3;
  int64_t max_numbers_ = 4;
  int64_t min_value_ = 1;
  int64_t max_value_ = 99;
  int64_t min_target_ = 1;
  int64_t max_target_ = 100;
  bool answer_tags_ = false;
  double eval_fraction_ = 0.1;
};

}  // namespace aspen::tasks
