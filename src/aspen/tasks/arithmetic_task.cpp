#include "aspen/tasks/arithmetic_task.h"

#include "aspen/reward/json_options.h"
#include "aspen/tasks/imports.h"
#include "aspen/tasks/seeded_rng.h"
#include "aspen/tasks/split_assignment.h"
#include "aspen/util/error.h"

namespace aspen::tasks {
namespace {

// A uniform operand with `digits` digits; one-digit operands include 0.
int64_t draw_operand(SplitMix64& rng, int64_t digits) {
  int64_t hi = 1;
  for (int64_t i = 0; i < digits; ++i) hi *= 10;
  return rng.uniform(digits == 1 ? 0 : hi / 10, hi - 1);
}

// A uniform draw in [0, 1) fixed per problem (FNV-1a of its id and a salt), so every
// epoch sees the same target.
double problem_draw(const std::string& id, uint64_t salt) {
  uint64_t hash = 1469598103934665603ull ^ salt;
  for (unsigned char c : id) hash = (hash ^ c) * 1099511628211ull;
  return static_cast<double>(SplitMix64(hash).next() >> 11) * 0x1.0p-53;
}

}  // namespace

ArithmeticTask::ArithmeticTask(const nlohmann::json& json) {
  JsonOptions reader(json, "task options (arithmetic)");
  int64_t digits = reader.integer("digits", 2);
  min_digits_ = reader.integer("min_digits", digits);
  max_digits_ = reader.integer("max_digits", digits);
  std::vector<std::string> ops = reader.strings("ops", {"+", "-", "*"});
  allow_negative_ = reader.boolean("allow_negative", allow_negative_);
  eval_fraction_ = reader.number("eval_fraction", eval_fraction_);
  teacher_carry_slip_ = reader.number("teacher_carry_slip", teacher_carry_slip_);
  teacher_tool_rate_ = reader.number("teacher_tool_rate", teacher_tool_rate_);
  const std::string answer_style = reader.string("answer_style", "number");
  reader.check_no_unknown_keys();
  check_input(answer_style == "number" || answer_style == "sentence",
              "answer_style must be \"number\" or \"sentence\", got \"" + answer_style + "\"",
              reader.path("answer_style"));
  sentence_answers_ = answer_style == "sentence";
  check_input(teacher_tool_rate_ >= 0 && teacher_tool_rate_ <= 1,
              "teacher_tool_rate must be in [0, 1]", reader.path("teacher_tool_rate"));
  check_input(teacher_carry_slip_ >= 0 && teacher_carry_slip_ <= 1,
              "teacher_carry_slip must be in [0, 1]", reader.path("teacher_carry_slip"));

  // 9 digits keeps every product below 10^18, inside int64.
  check_input(1 <= min_digits_ && min_digits_ <= max_digits_ && max_digits_ <= 9,
              "need 1 <= min_digits <= max_digits <= 9, got " + std::to_string(min_digits_) + ".." +
                  std::to_string(max_digits_),
              reader.path("digits"));
  check_input(!ops.empty(), "ops must not be empty", reader.path("ops"));
  for (const std::string& op : ops) {
    check_input(op == "+" || op == "-" || op == "*", "unsupported op \"" + op + "\"",
                reader.path("ops"), "use a subset of [\"+\", \"-\", \"*\"]");
    ops_.push_back(op[0]);
  }
  check_input(eval_fraction_ > 0 && eval_fraction_ < 1, "eval_fraction must be in (0, 1)",
              reader.path("eval_fraction"));
}

std::vector<TaskExample> ArithmeticTask::make_split(Split split, int64_t count,
                                                    uint64_t seed) const {
  auto draw = [this](SplitMix64& rng) -> std::optional<TaskExample> {
    int64_t a = draw_operand(rng, rng.uniform(min_digits_, max_digits_));
    int64_t b = draw_operand(rng, rng.uniform(min_digits_, max_digits_));
    char op = ops_[rng.uniform(0, static_cast<int64_t>(ops_.size()) - 1)];
    if (op == '-' && !allow_negative_ && a < b) std::swap(a, b);
    int64_t result = op == '+' ? a + b : op == '-' ? a - b : a * b;
    TaskExample example;
    example.prompt_text = std::to_string(a) + op + std::to_string(b) + "=";
    example.id = "arithmetic:" + example.prompt_text.substr(0, example.prompt_text.size() - 1);
    example.ground_truth = result;
    example.verifier = verifier_name();
    return example;
  };
  return collect_split(name(), split, count, seed, eval_fraction_, draw);
}

nlohmann::json ArithmeticTask::verifier_options() const {
  if (sentence_answers_) return {{"extract", "auto"}, {"answer_phrase", true}};
  return {{"extract", "plain"}};
}

std::string ArithmeticTask::sft_target(const TaskExample& example) const {
  const std::string number = sft_number(example);
  return sentence_answers_ ? "The answer is " + number : number;
}

std::string ArithmeticTask::sft_number(const TaskExample& example) const {
  check_input(example.ground_truth.is_number_integer(),
              "arithmetic ground truth must be an integer, got " + example.ground_truth.dump(),
              example.id);
  const int64_t result = example.ground_truth.get<int64_t>();
  if (teacher_carry_slip_ <= 0.0) return std::to_string(result);
  // "a+b=": the sloppy teacher drops the carry out of the units column.
  const std::string& prompt = example.prompt_text;
  const size_t plus = prompt.find('+');
  if (plus == std::string::npos || prompt.empty() || prompt.back() != '=') {
    return std::to_string(result);
  }
  const int64_t a = std::stoll(prompt.substr(0, plus));
  const int64_t b = std::stoll(prompt.substr(plus + 1, prompt.size() - plus - 2));
  if (a % 10 + b % 10 < 10) return std::to_string(result);
  const double u = problem_draw(example.id, 0);
  return std::to_string(u < teacher_carry_slip_ ? result - 10 : result);
}

std::vector<std::string> ArithmeticTask::demonstration_turns(const TaskExample& example) const {
  const std::string answer = sft_target(example);
  if (teacher_tool_rate_ <= 0.0 || problem_draw(example.id, 0x7f4a7c15) >= teacher_tool_rate_) {
    return {answer};
  }
  // The call as the Qwen templates print an assistant turn's tool_calls (json.dumps
  // spacing), the expression being the prompt without its "=".
  const std::string& prompt = example.prompt_text;
  const std::string expression = prompt.substr(0, prompt.size() - 1);
  return {"<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"" +
              expression + "\"}}\n</tool_call>",
          answer};
}

}  // namespace aspen::tasks
