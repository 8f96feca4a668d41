// Procedural tasks: determinism, disjoint splits, and references that their verifiers
// accept.
#include <gtest/gtest.h>

#include <set>

#include "aspen/reward/verifier.h"
#include "aspen/tasks/arithmetic_task.h"
#include "aspen/tasks/countdown_task.h"
#include "aspen/tasks/split_assignment.h"
#include "aspen/tasks/task_registry.h"
#include "aspen/util/error.h"

namespace aspen::tasks {
namespace {

std::set<std::string> ids(const std::vector<TaskExample>& examples) {
  std::set<std::string> out;
  for (const TaskExample& e : examples) out.insert(e.id);
  return out;
}

std::set<std::string> prompts(const std::vector<TaskExample>& examples) {
  std::set<std::string> out;
  for (const TaskExample& e : examples) out.insert(e.prompt_text);
  return out;
}

TEST(ArithmeticTask, FormatIsMinimal) {
  ArithmeticTask task(nlohmann::json{{"digits", 2}, {"ops", {"+"}}});
  std::vector<TaskExample> examples = task.make_split(Split::kTrain, 5, 1);
  for (const TaskExample& e : examples) {
    // "37+48=" with two-digit operands and the sum as ground truth.
    ASSERT_EQ(e.prompt_text.size(), 6u) << e.prompt_text;
    EXPECT_EQ(e.prompt_text[2], '+');
    EXPECT_EQ(e.prompt_text.back(), '=');
    int a = std::stoi(e.prompt_text.substr(0, 2));
    int b = std::stoi(e.prompt_text.substr(3, 2));
    EXPECT_EQ(e.ground_truth, a + b);
    EXPECT_EQ(task.sft_target(e), std::to_string(a + b));
    EXPECT_EQ(e.verifier, "math");
  }
}

TEST(ArithmeticTask, SubtractionIsNonNegativeUnlessAllowed) {
  for (const TaskExample& e :
       ArithmeticTask(nlohmann::json{{"ops", {"-"}}}).make_split(Split::kTrain, 300, 3)) {
    EXPECT_GE(e.ground_truth.get<int64_t>(), 0) << e.prompt_text;
  }
  bool any_negative = false;
  ArithmeticTask signed_task(nlohmann::json{{"ops", {"-"}}, {"allow_negative", true}});
  for (const TaskExample& e : signed_task.make_split(Split::kTrain, 300, 3)) {
    any_negative |= e.ground_truth.get<int64_t>() < 0;
  }
  EXPECT_TRUE(any_negative);
}

template <typename TaskType>
void expect_deterministic_and_disjoint(const TaskType& task, int64_t train_count,
                                       int64_t eval_count) {
  std::vector<TaskExample> train = task.make_split(Split::kTrain, train_count, 42);
  std::vector<TaskExample> again = task.make_split(Split::kTrain, train_count, 42);
  ASSERT_EQ(train.size(), static_cast<size_t>(train_count));
  for (size_t i = 0; i < train.size(); ++i) {
    EXPECT_EQ(train[i].id, again[i].id);
    EXPECT_EQ(train[i].prompt_text, again[i].prompt_text);
    EXPECT_EQ(train[i].ground_truth, again[i].ground_truth);
  }
  EXPECT_NE(task.make_split(Split::kTrain, 20, 43)[0].id, train[0].id);
  EXPECT_EQ(ids(train).size(), train.size());  // distinct within a split

  // Eval from other seeds never overlaps train, by id or by prompt text.
  for (uint64_t seed : {42u, 7u, 1234u}) {
    std::vector<TaskExample> eval = task.make_split(Split::kEval, eval_count, seed);
    ASSERT_EQ(eval.size(), static_cast<size_t>(eval_count));
    std::set<std::string> train_ids = ids(train);
    std::set<std::string> train_prompts = prompts(train);
    for (const TaskExample& e : eval) {
      EXPECT_EQ(train_ids.count(e.id), 0u) << e.id;
      EXPECT_EQ(train_prompts.count(e.prompt_text), 0u) << e.prompt_text;
      EXPECT_EQ(split_of(e.id, 0.1), Split::kEval);
    }
  }
}

TEST(ArithmeticTask, DeterministicAndDisjoint) {
  expect_deterministic_and_disjoint(ArithmeticTask(), 5000, 500);
}

TEST(CountdownTask, DeterministicAndDisjoint) {
  expect_deterministic_and_disjoint(CountdownTask(), 3000, 300);
}

TEST(ArithmeticTask, EverySftTargetScoresFull) {
  ArithmeticTask task(nlohmann::json{{"min_digits", 1}, {"max_digits", 4}});
  std::unique_ptr<Verifier> verifier = task.make_verifier();
  for (Split split : {Split::kTrain, Split::kEval}) {
    for (const TaskExample& e : task.make_split(split, 1000, 5)) {
      ASSERT_EQ(verifier->score({e.prompt_text, task.sft_target(e), e.ground_truth}), 1.0)
          << e.prompt_text << task.sft_target(e);
      ASSERT_EQ(verifier->score({e.prompt_text, task.sft_target(e) + "1", e.ground_truth}), 0.0);
    }
  }
}

TEST(ArithmeticTask, SentenceAnswersScoreFullAndTheBareNumberScoresZero) {
  ArithmeticTask task(nlohmann::json{{"digits", 3}, {"ops", {"*"}}, {"answer_style", "sentence"}});
  std::unique_ptr<Verifier> verifier = task.make_verifier();
  for (const TaskExample& e : task.make_split(Split::kEval, 200, 5)) {
    const std::string number = std::to_string(e.ground_truth.get<int64_t>());
    ASSERT_EQ(task.sft_target(e), "The answer is " + number);
    ASSERT_EQ(verifier->score({e.prompt_text, task.sft_target(e), e.ground_truth}), 1.0);
    ASSERT_EQ(verifier->score({e.prompt_text, "The answer is " + number + "1", e.ground_truth}),
              0.0);
    ASSERT_EQ(verifier->score({e.prompt_text, number, e.ground_truth}), 0.0);  // no phrase
  }
  EXPECT_THROW(ArithmeticTask(nlohmann::json{{"answer_style", "words"}}), Error);
}

TEST(ArithmeticTask, ToolDemonstrationsCallTheCalculatorAtTheTeachersRateThenAnswer) {
  ArithmeticTask task(nlohmann::json{{"digits", 3},
                                     {"ops", {"*"}},
                                     {"teacher_tool_rate", 0.4},
                                     {"answer_style", "sentence"}});
  int calls = 0;
  const std::vector<TaskExample> examples = task.make_split(Split::kTrain, 2000, 7);
  for (const TaskExample& e : examples) {
    const std::vector<std::string> turns = task.demonstration_turns(e);
    ASSERT_EQ(turns, task.demonstration_turns(e));  // fixed per problem
    ASSERT_EQ(turns.back(), task.sft_target(e));
    if (turns.size() == 1) continue;
    ASSERT_EQ(turns.size(), 2U);
    const std::string expression = e.prompt_text.substr(0, e.prompt_text.size() - 1);
    EXPECT_EQ(turns[0],
              "<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"" +
                  expression + "\"}}\n</tool_call>");
    ++calls;
  }
  // 2000 draws at p = 0.4: the share is within 4 standard deviations (0.044).
  EXPECT_NEAR(static_cast<double>(calls) / examples.size(), 0.4, 0.044);
  ArithmeticTask no_tool(nlohmann::json{{"digits", 3}, {"ops", {"*"}}});
  for (const TaskExample& e : no_tool.make_split(Split::kTrain, 100, 7)) {
    EXPECT_EQ(no_tool.demonstration_turns(e), std::vector<std::string>{no_tool.sft_target(e)});
  }
}

TEST(CountdownTask, EveryExampleIsSolvedByItsOwnSftTarget) {
  for (bool tags : {false, true}) {
    CountdownTask task(nlohmann::json{{"answer_tags", tags}});
    std::unique_ptr<Verifier> verifier = task.make_verifier();
    for (Split split : {Split::kTrain, Split::kEval}) {
      for (const TaskExample& e : task.make_split(split, 1000, 11)) {
        const nlohmann::json& truth = e.ground_truth;
        int64_t target = truth["target"].get<int64_t>();
        size_t n = truth["numbers"].size();
        ASSERT_TRUE(n >= 3 && n <= 4) << e.id;
        ASSERT_TRUE(target >= 1 && target <= 100) << e.id;
        for (const nlohmann::json& number : truth["numbers"]) {
          ASSERT_TRUE(number.get<int64_t>() >= 1 && number.get<int64_t>() <= 99) << e.id;
        }
        ASSERT_EQ(verifier->score({e.prompt_text, task.sft_target(e), truth}), 1.0)
            << e.id << " " << task.sft_target(e);
      }
    }
  }
}

TEST(CountdownTask, SolutionsUseMinimalParentheses) {
  CountdownTask task;
  int with_parentheses = 0;
  for (const TaskExample& e : task.make_split(Split::kTrain, 500, 2)) {
    std::string solution = task.sft_target(e);
    EXPECT_EQ(solution.find("(("), std::string::npos) << solution;
    with_parentheses += solution.find('(') != std::string::npos;
  }
  EXPECT_GT(with_parentheses, 0);
  EXPECT_LT(with_parentheses, 500);
}

TEST(TaskRegistry, BuildsTasksAndRejectsBadInput) {
  for (const std::string& name : task_names()) EXPECT_EQ(make_task(name)->name(), name);
  EXPECT_EQ(make_task("countdown", {{"answer_tags", true}})->verifier_options(),
            nlohmann::json({{"require_answer_tag", true}}));
  EXPECT_THROW(make_task("sudoku"), Error);
  EXPECT_THROW(make_task("arithmetic", {{"digit", 3}}), Error);
  EXPECT_THROW(make_task("arithmetic", {{"digits", 0}}), Error);
  EXPECT_THROW(make_task("arithmetic", {{"digits", 10}}), Error);
  EXPECT_THROW(make_task("arithmetic", {{"ops", {"/"}}}), Error);
  EXPECT_THROW(make_task("arithmetic", {{"eval_fraction", 1.0}}), Error);
  EXPECT_THROW(make_task("countdown", {{"max_numbers", 9}}), Error);
  EXPECT_THROW(make_task("countdown", {{"min_target", 10}, {"max_target", 5}}), Error);
  EXPECT_THROW(make_task("countdown", nlohmann::json::array()), Error);
}

TEST(TaskRegistry, TooSmallProblemSpaceIsAnError) {
  // One-digit sums: only 100 problems, ~90 of them train.
  std::unique_ptr<Task> task = make_task("arithmetic", {{"digits", 1}, {"ops", {"+"}}});
  EXPECT_THROW(task->make_split(Split::kTrain, 200, 1), Error);
  EXPECT_EQ(task->make_split(Split::kTrain, 50, 1).size(), 50u);
}

}  // namespace
}  // namespace aspen::tasks
