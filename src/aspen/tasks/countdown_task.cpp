#include "aspen/tasks/countdown_task.h"

#include <algorithm>

#include "aspen/reward/json_options.h"
#include "aspen/reward/rational.h"
#include "aspen/tasks/imports.h"
#include "aspen/tasks/split_assignment.h"
#include "aspen/util/error.h"

namespace aspen::tasks {
namespace {

// A subtree of the construction: its exact value and its text with minimal parentheses.
struct Node {
  Rational value;
  std::string text;
  int precedence;  // 1: + -, 2: * /, 3: a number
};

int precedence_of(char op) {
  return (op == '+' || op == '-') ? 1 : 2;
}

std::optional<Node> combine(const Node& a, char op, const Node& b) {
  std::optional<Rational> value = op == '+'   ? a.value + b.value
                                  : op == '-' ? a.value - b.value
                                  : op == '*' ? a.value * b.value
                                              : a.value / b.value;
  if (!value) return std::nullopt;  // division by zero or overflow
  int p = precedence_of(op);
  // The right operand of - and / needs parentheses at equal precedence: a-(b-c) != a-b-c.
  bool wrap_left = a.precedence < p;
  bool wrap_right = b.precedence < p || (b.precedence == p && (op == '-' || op == '/'));
  std::string left = wrap_left ? "(" + a.text + ")" : a.text;
  std::string right = wrap_right ? "(" + b.text + ")" : b.text;
  return Node{*value, left + op + right, p};
}

std::string join(const std::vector<int64_t>& numbers, const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < numbers.size(); ++i) {
    out += (i == 0 ? "" : separator) + std::to_string(numbers[i]);
  }
  return out;
}

}  // namespace

CountdownTask::CountdownTask(const nlohmann::json& json) {
  JsonOptions reader(json, "task options (countdown)");
  min_numbers_ = reader.integer("min_numbers", min_numbers_);
  max_numbers_ = reader.integer("max_numbers", max_numbers_);
  min_value_ = reader.integer("min_value", min_value_);
  max_value_ = reader.integer("max_value", max_value_);
  min_target_ = reader.integer("min_target", min_target_);
  max_target_ = reader.integer("max_target", max_target_);
  answer_tags_ = reader.boolean("answer_tags", answer_tags_);
  eval_fraction_ = reader.number("eval_fraction", eval_fraction_);
  reader.check_no_unknown_keys();

  check_input(2 <= min_numbers_ && min_numbers_ <= max_numbers_ && max_numbers_ <= 6,
              "need 2 <= min_numbers <= max_numbers <= 6", reader.path("min_numbers"));
  // Values up to 10^6 keep every tree of 6 numbers inside int64 rationals.
  check_input(0 <= min_value_ && min_value_ <= max_value_ && max_value_ <= 1'000'000,
              "need 0 <= min_value <= max_value <= 1000000", reader.path("min_value"));
  check_input(min_target_ <= max_target_, "need min_target <= max_target",
              reader.path("min_target"));
  check_input(eval_fraction_ > 0 && eval_fraction_ < 1, "eval_fraction must be in (0, 1)",
              reader.path("eval_fraction"));
}

std::vector<TaskExample> CountdownTask::make_split(Split split, int64_t count,
                                                   uint64_t seed) const {
  static const char kOps[] = {'+', '-', '*', '/'};
  auto draw = [this](SplitMix64& rng) -> std::optional<TaskExample> {
    int64_t k = rng.uniform(min_numbers_, max_numbers_);
    std::vector<int64_t> numbers;
    std::vector<Node> pool;
    for (int64_t i = 0; i < k; ++i) {
      numbers.push_back(rng.uniform(min_value_, max_value_));
      pool.push_back(Node{Rational(numbers.back()), std::to_string(numbers.back()), 3});
    }
    while (pool.size() > 1) {
      int64_t last = static_cast<int64_t>(pool.size()) - 1;
      size_t i = static_cast<size_t>(rng.uniform(0, last));
      size_t j = static_cast<size_t>(rng.uniform(0, last - 1));
      if (j >= i) ++j;  // j != i, uniformly
      std::optional<Node> merged = combine(pool[i], kOps[rng.uniform(0, 3)], pool[j]);
      if (!merged) return std::nullopt;
      pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(std::max(i, j)));
      pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(std::min(i, j)));
      pool.push_back(std::move(*merged));
    }
    const Rational& value = pool[0].value;
    if (!value.is_integer() || value.num() < min_target_ || value.num() > max_target_) {
      return std::nullopt;
    }
    int64_t target = value.num();
    std::vector<int64_t> sorted = numbers;
    std::sort(sorted.begin(), sorted.end());

    TaskExample example;
    example.id = "countdown:" + join(sorted, ",") + "->" + std::to_string(target);
    example.prompt_text =
        "Using the numbers " + join(numbers, ", ") + ", write an equation that equals " +
        std::to_string(target) + ". Use + - * / and parentheses, and each number exactly once." +
        (answer_tags_ ? " Put the equation inside <answer></answer>." : "") + "\n";
    example.ground_truth = {{"target", target}, {"numbers", numbers}, {"solution", pool[0].text}};
    example.verifier = verifier_name();
    return example;
  };
  return collect_split(name(), split, count, seed, eval_fraction_, draw);
}

std::string CountdownTask::sft_target(const TaskExample& example) const {
  const nlohmann::json& truth = example.ground_truth;
  check_input(truth.is_object() && truth.contains("solution") && truth["solution"].is_string(),
              "countdown ground truth has no \"solution\" string", example.id,
              "only examples generated by CountdownTask carry a reference solution");
  std::string equation = truth["solution"].get<std::string>();
  return answer_tags_ ? "<answer>" + equation + "</answer>" : equation;
}

}  // namespace aspen::tasks
