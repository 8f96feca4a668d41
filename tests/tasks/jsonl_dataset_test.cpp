// JSONL prompt datasets: fields, chat templates and errors that name file and line.
#include "aspen/tasks/jsonl_dataset.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "aspen/util/error.h"

namespace aspen::tasks {
namespace {

std::vector<TaskExample> read(const std::string& text, const JsonlDatasetOptions& options = {},
                              const ChatTemplate* chat_template = nullptr) {
  std::istringstream in(text);
  return read_jsonl_dataset(in, "data.jsonl", options, chat_template);
}

// Runs `call`, expecting aspen::Error whose message contains every one of `words`.
template <typename Call>
void expect_error(Call call, std::initializer_list<std::string> words) {
  try {
    call();
    ADD_FAILURE() << "expected aspen::Error";
  } catch (const Error& e) {
    for (const std::string& word : words) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  }
}

TEST(JsonlDataset, ReadsPromptsAnswersAndIds) {
  std::vector<TaskExample> examples = read(
      "{\"prompt\": \"1+1?\", \"answer\": \"2\"}\n"
      "\n"
      "{\"prompt\": \"2+2?\", \"answer\": 4, \"extra\": true}\n");
  ASSERT_EQ(examples.size(), 2u);
  EXPECT_EQ(examples[0].prompt_text, "1+1?");
  EXPECT_EQ(examples[0].ground_truth, "2");
  EXPECT_EQ(examples[0].id, "data.jsonl:1");
  EXPECT_EQ(examples[0].verifier, "math");
  EXPECT_EQ(examples[1].ground_truth, 4);
  EXPECT_EQ(examples[1].id, "data.jsonl:3");
}

TEST(JsonlDataset, DottedFieldsIdsAndPerLineVerifier) {
  JsonlDatasetOptions options;
  options.prompt_field = "question";
  options.answer_field = "reward_model.ground_truth";
  options.id_field = "uid";
  options.verifier_field = "ability";
  std::vector<TaskExample> examples = read(
      "{\"uid\": 7, \"question\": \"q\", \"reward_model\": {\"ground_truth\": \"5\"}}\n"
      "{\"uid\": \"b\", \"question\": \"r\", \"ability\": \"countdown\","
      " \"reward_model\": {\"ground_truth\": {\"target\": 3, \"numbers\": [1, 2]}}}\n",
      options);
  ASSERT_EQ(examples.size(), 2u);
  EXPECT_EQ(examples[0].id, "7");
  EXPECT_EQ(examples[0].verifier, "math");
  EXPECT_EQ(examples[1].id, "b");
  EXPECT_EQ(examples[1].verifier, "countdown");
  EXPECT_EQ(examples[1].ground_truth["target"], 3);
}

TEST(JsonlDataset, SystemPromptWithoutTemplateIsPrepended) {
  JsonlDatasetOptions options;
  options.system_prompt = "Be brief.";
  EXPECT_EQ(read("{\"prompt\": \"hi\", \"answer\": 1}\n", options)[0].prompt_text, "Be brief.\nhi");
}

TEST(JsonlDataset, ChatTemplateRendersStringAndMessagePrompts) {
  ChatTemplate chatml = ChatTemplate::builtin("chatml");
  JsonlDatasetOptions options;
  options.system_prompt = "Be brief.";
  std::vector<TaskExample> examples = read(
      "{\"prompt\": \"hi\", \"answer\": 1}\n"
      "{\"prompt\": [{\"role\": \"system\", \"content\": \"Own.\"},"
      " {\"role\": \"user\", \"content\": \"yo\"}], \"answer\": 2}\n",
      options, &chatml);
  ASSERT_EQ(examples.size(), 2u);
  EXPECT_EQ(examples[0].prompt_text,
            chatml.render({{"system", "Be brief."}, {"user", "hi"}}, true));
  EXPECT_EQ(examples[0].prompt_text,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
            "<|im_start|>assistant\n");
  // The row's own system message wins over the configured one.
  EXPECT_EQ(examples[1].prompt_text, chatml.render({{"system", "Own."}, {"user", "yo"}}, true));
}

TEST(JsonlDataset, BadLinesNameFileAndLine) {
  expect_error([] { read("{\"prompt\": \"a\", \"answer\": 1}\n{\"prompt\": oops}\n"); },
               {"data.jsonl: line 2", "malformed JSON"});
  expect_error([] { read("{\"prompt\": \"a\", \"answer\": 1}\n\n{\"prompt\": \"b\"}\n"); },
               {"data.jsonl: line 3", "missing field \"answer\""});
  expect_error([] { read("{\"answer\": 1}\n"); }, {"line 1", "missing field \"prompt\""});
  expect_error([] { read("[1, 2]\n"); }, {"line 1", "JSON object"});
  expect_error([] { read("{\"prompt\": \"a\", \"answer\": null}\n"); },
               {"line 1: answer", "the answer is null"});
  expect_error([] { read("{\"prompt\": 5, \"answer\": 1}\n"); }, {"line 1: prompt", "string"});
  expect_error(
      [] { read("{\"prompt\": [{\"role\": \"user\", \"content\": \"x\"}], \"answer\": 1}\n"); },
      {"line 1", "chat template"});
  JsonlDatasetOptions with_ids;
  with_ids.id_field = "id";
  expect_error(
      [&] {
        read(
            "{\"id\": 1, \"prompt\": \"a\", \"answer\": 1}\n"
            "{\"id\": 1, \"prompt\": \"b\", \"answer\": 2}\n",
            with_ids);
      },
      {"line 2", "duplicate id \"1\""});
  ChatTemplate chatml = ChatTemplate::builtin("chatml");
  expect_error(
      [&] {
        read(
            "{\"prompt\": [{\"role\": \"wizard\", \"content\": \"x\"}],"
            " \"answer\": 1}\n",
            {}, &chatml);
      },
      {"line 1"});
}

TEST(JsonlDataset, LoadsFromFileAndNamesItInErrors) {
  std::string path = ::testing::TempDir() + "aspen_tasks_dataset.jsonl";
  {
    std::ofstream out(path);
    out << "{\"prompt\": \"a\", \"answer\": 1}\n{\"prompt\": \"b\", \"answer\": }\n";
  }
  expect_error([&] { load_jsonl_dataset(path, {}, nullptr); }, {path + ": line 2"});
  {
    std::ofstream out(path);
    out << "{\"prompt\": \"a\", \"answer\": 1}\n";
  }
  std::vector<TaskExample> examples = load_jsonl_dataset(path, {}, nullptr);
  ASSERT_EQ(examples.size(), 1u);
  EXPECT_EQ(examples[0].id, path + ":1");
  std::remove(path.c_str());
  expect_error([&] { load_jsonl_dataset(path, {}, nullptr); }, {path, "cannot open"});
}

// Fuzzer finding (fuzz/jsonl_dataset_fuzz.cpp): a number too large for a double let
// nlohmann's out_of_range escape instead of an aspen::Error naming the line.
TEST(JsonlDataset, NumberOutOfRangeIsAnErrorNamingTheLine) {
  try {
    read("{\"prompt\": \"p\", \"answer\": \"a\"}\n{\"prompt\": \"p\", \"answer\": 1e999}\n");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("data.jsonl: line 2"), std::string::npos) << e.what();
  }
}

// A line nested 100,000 levels deep overflowed the stack once the value was copied; it is
// refused while parsing (util/bounded_json.h), naming the line.
TEST(JsonlDataset, DeeplyNestedLineIsAnErrorNamingTheLine) {
  const std::string deep = "{\"prompt\": \"p\", \"answer\": " + std::string(100000, '[') +
                           std::string(100000, ']') + "}\n";
  try {
    read(deep);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nested deeper than 512"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("data.jsonl: line 1"), std::string::npos) << e.what();
  }
}

// {"answer": "4", "answer": "5"} would have graded against "5" silently (nlohmann keeps
// the last value); either may be the one meant, so the line is refused.
TEST(JsonlDataset, ARepeatedKeyIsAnErrorNamingTheLineAndKey) {
  expect_error(
      [] {
        read("{\"prompt\": \"2+2?\", \"answer\": \"4\"}\n"
             "{\"prompt\": \"3+3?\", \"answer\": \"6\", \"answer\": \"5\"}\n");
      },
      {"data.jsonl: line 2", "duplicate key \"answer\""});
  // Nested objects too (a chat message), and the same key in two objects is fine.
  expect_error(
      [] {
        read("{\"messages\": [{\"role\": \"user\", \"role\": \"system\", \"content\": "
             "\"hi\"}], \"answer\": \"1\"}\n");
      },
      {"data.jsonl: line 1", "duplicate key \"role\""});
  EXPECT_EQ(read("{\"prompt\": \"p\", \"answer\": {\"prompt\": 1}}\n").size(), 1u);
}

}  // namespace
}  // namespace aspen::tasks
