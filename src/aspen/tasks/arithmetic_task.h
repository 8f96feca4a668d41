// ArithmeticTask: "a op b" drills for a tiny model. Format, chosen to be minimal and
// unambiguous for a model with a byte-level vocabulary:
//   prompt       "37+48="
//   sft_target   "85"          (the model then emits end-of-text)
//   ground truth 85            (JSON integer), graded by the math verifier with
//                              {"extract": "plain"}: the whole response, trimmed, must equal
//                              the number ("85", "85.0" and " 85\n" pass; "85 apples" fails).
// Options (JSON, all optional):
//   digits            digits per operand, sets min_digits = max_digits      (default 2)
//   min_digits, max_digits  each operand draws its digit count in this range (1..9)
//   ops               subset of ["+", "-", "*"]                  (default all three)
//   allow_negative    when false, "a-b" is drawn with a >= b     (default false)
//   eval_fraction     share of the problem space held out for eval  (default 0.1)
//   teacher_carry_slip  probability that sft_target of an addition with a carry out of
//                     the units column drops that carry ("38+45=" -> "73"), fixed per
//                     problem: a sloppy demonstrator whose systematic mistake a
//                     verifier-driven RL phase can correct              (default 0)
//   teacher_tool_rate  multi-turn runs with the calculator tool (rollout.environment):
//                     the probability, fixed per problem, that a demonstration calls the
//                     calculator and then answers with its result; the other
//                     demonstrations answer at once, correctly, as a teacher who can
//                     compute in its head - which a tiny model cannot imitate for large
//                     operands, so RL must discover that the tool pays (default 0)
//   answer_style      "number" (the format above) or "sentence": the teacher answers
//                     "The answer is 85" and the verifier reads the number after "answer
//                     is" ({"extract": "auto", "answer_phrase": true}). With the tool, a
//                     sentence makes every direct answer start with the same token, so the
//                     warmed-up model's greedy first step is "answer at once" unless the
//                     teacher calls the tool more often than not; with bare numbers that
//                     first token is spread over the digits, and greedy picks the tool
//                     call at a tool rate of ~0.15 already (measured, docs/benchmarks.md)
//                                                                  (default "number")
// One-digit operands include 0. Canonical problem (the id) = the prompt.
// Thread safety: immutable; methods may run concurrently.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aspen/tasks/imports.h"
#include "aspen/tasks/task.h"

namespace aspen::tasks {

class ArithmeticTask : public Task {
 public:
  // Throws aspen::Error naming "task options (arithmetic).<key>" for bad options.
  explicit ArithmeticTask(const nlohmann::json& options = nlohmann::json::object());

  std::string name() const override { return "arithmetic"; }
  std::vector<TaskExample> make_split(Split split, int64_t count, uint64_t seed) const override;
  std::string verifier_name() const override { return "math"; }
  nlohmann::json verifier_options() const override;
  std::string sft_target(const TaskExample& example) const override;
  std::vector<std::string> demonstration_turns(const TaskExample& example) const override;

 private:
  // The teacher's number: the result, or with teacher_carry_slip its slip.
  std::string sft_number(const TaskExample& example) const;

  int64_t min_digits_ = 2;
  int64_t max_digits_ = 2;
  std::vector<char> ops_;
  bool allow_negative_ = false;
  double eval_fraction_ = 0.1;
  double teacher_carry_slip_ = 0.0;
  double teacher_tool_rate_ = 0.0;
  bool sentence_answers_ = false;
};

}  // namespace aspen::tasks
