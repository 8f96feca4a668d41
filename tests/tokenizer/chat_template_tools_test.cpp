// ChatTemplate with tools: tool schemas, assistant tool_calls and tool responses rendered
// exactly as HF transformers renders them. The expected texts are HF's own output,
// generated once by tools/python/chat_template_oracle.py from the conversations in
// tests/tokenizer/data/chat_tool_cases.jsonl and checked in as chat_tool_golden.jsonl,
// under the real Qwen3 template (shared/fixtures/qwen3-tokenizer) and the Qwen2.5-Instruct
// one (data/qwen2.5_chat_template.jinja).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aspen/tokenizer/chat_message_json.h"
#include "aspen/tokenizer/chat_template.h"
#include "aspen/tokenizer/python_json.h"
#include "aspen/util/error.h"
#include "aspen/util/file.h"
#include "support/oracles.h"

namespace aspen::tokenizer {
namespace {

using nlohmann::ordered_json;

std::string data_path(const std::string& name) {
  return ASPEN_SOURCE_DIR "/tests/tokenizer/data/" + name;
}

std::vector<ordered_json> read_ordered_jsonl(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing test data " << path;
  std::vector<ordered_json> values;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) values.push_back(ordered_json::parse(line));
  }
  return values;
}

std::string qwen25_template_text() {
  return read_file(data_path("qwen2.5_chat_template.jinja"));
}

ChatTemplate recognised(const std::string& family) {
  return family == "qwen3" ? ChatTemplate::from_config(testing::qwen3_tokenizer_dir())
                           : ChatTemplate::from_template_text(qwen25_template_text(), "qwen2.5");
}

std::string render_case(const ChatTemplate& chat, const ordered_json& c) {
  std::vector<ordered_json> tools;
  if (c["tools"].is_array()) tools.assign(c["tools"].begin(), c["tools"].end());
  return chat.render(chat_messages_from_json(c["messages"], c["name"].get<std::string>()),
                     c["add_generation_prompt"].get<bool>(), c.value("enable_thinking", true),
                     tools);
}

TEST(ChatTemplateToolsTest, RendersEveryCaseExactlyAsTransformers) {
  std::map<std::string, ordered_json> cases;
  for (const ordered_json& c : read_ordered_jsonl(data_path("chat_tool_cases.jsonl"))) {
    cases[c["name"].get<std::string>()] = c;
  }
  const std::vector<ordered_json> golden = read_ordered_jsonl(data_path("chat_tool_golden.jsonl"));
  ASSERT_GE(cases.size(), 13u);
  ASSERT_EQ(golden.size(), 2 * cases.size()) << "one golden text per case and template";
  const std::map<std::string, ChatTemplate> templates = {{"qwen3", recognised("qwen3")},
                                                         {"qwen2.5", recognised("qwen2.5")}};
  for (const ordered_json& expected : golden) {
    const std::string name = expected["case"].get<std::string>();
    const std::string family = expected["template"].get<std::string>();
    ASSERT_EQ(cases.count(name), 1u) << name;
    const std::string text = expected["text"].get<std::string>();
    EXPECT_EQ(render_case(templates.at(family), cases.at(name)), text) << name << " / " << family;
    // The built-in templates render the same as the recognised real ones.
    EXPECT_EQ(render_case(ChatTemplate::builtin(family), cases.at(name)), text)
        << name << " / builtin " << family;
  }
}

TEST(ChatTemplateToolsTest, EmptyToolListRendersLikeNoTools) {
  const std::vector<ChatMessage> chat = {{"system", "S"}, {"user", "Hi"}};
  for (const std::string family : {"qwen3", "qwen2.5"}) {
    const ChatTemplate t = recognised(family);
    EXPECT_EQ(t.render(chat, true, true, {}), t.render(chat, true));
    EXPECT_NE(t.render(chat, true, true, {ordered_json{{"type", "function"}}}),
              t.render(chat, true));
  }
}

TEST(ChatTemplateToolsTest, ChatMLRefusesToolsRatherThanDroppingThem) {
  const ChatTemplate chatml = ChatTemplate::builtin("chatml");
  EXPECT_THROW(chatml.render({{"user", "Hi"}}, true, true, {ordered_json::object()}), Error);
  std::vector<ChatMessage> chat = {{"user", "Hi"}, {"assistant", ""}};
  chat[1].tool_calls.push_back({"calculator", {{"expression", "1+1"}}});
  EXPECT_THROW(chatml.render(chat, false), Error);
  EXPECT_NO_THROW(ChatTemplate::builtin("qwen3").render(chat, false));
}

TEST(ChatTemplateToolsTest, ToolCallsOnlyOnAssistantMessages) {
  std::vector<ChatMessage> chat = {{"user", "Hi"}};
  chat[0].tool_calls.push_back({"f", ordered_json::object()});
  try {
    ChatTemplate::builtin("qwen3").render(chat, true);
    FAIL() << "expected aspen::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.problem(), "a user message carries tool_calls");
    EXPECT_EQ(e.input(), "chat message 0");
  }
}

TEST(ChatTemplateToolsTest, TemplatesWithAlteredToolSectionsAreNotRecognised) {
  const std::string q25 = qwen25_template_text();
  // Calls printed without their newline, or a different default prompt in the tools branch.
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"{{- '\\n<tool_call>\\n{\"name\": \"' }}", "{{- '<tool_call>\\n{\"name\": \"' }}"},
           {"{{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}",
            "{{- 'You are someone else.' }}"},
           {"{{- tool | tojson }}", "{{- tool }}"}}) {
    std::string altered = q25;
    const size_t at = altered.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    altered.replace(at, from.size(), to);
    EXPECT_THROW(ChatTemplate::from_template_text(altered, "altered"), Error) << from;
  }
  const ordered_json config =
      ordered_json::parse(read_file(testing::qwen3_tokenizer_dir() + "/tokenizer_config.json"));
  std::string q3 = config["chat_template"].get<std::string>();
  const std::string verbatim = "{{- tool_call.arguments }}";
  const size_t at = q3.find(verbatim);
  ASSERT_NE(at, std::string::npos);
  q3.replace(at, verbatim.size(), "{{- tool_call.arguments | tojson }}");
  EXPECT_THROW(ChatTemplate::from_template_text(q3, "altered qwen3"), Error);
}

TEST(ChatTemplateToolsTest, MessagesFromOpenAIAndHFShapes) {
  const ordered_json messages = ordered_json::parse(R"([
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"b\":1,\"a\":2}"}},
      {"name": "g", "arguments": {"z": 1, "a": 2}}]},
    {"role": "tool", "content": "r", "tool_call_id": "c1"}])");
  const std::vector<ChatMessage> chat = chat_messages_from_json(messages, "messages");
  ASSERT_EQ(chat.size(), 2u);
  EXPECT_EQ(chat[0].content, "");
  ASSERT_EQ(chat[0].tool_calls.size(), 2u);
  EXPECT_EQ(chat[0].tool_calls[0].name, "f");
  EXPECT_EQ(chat[0].tool_calls[0].arguments, "{\"b\":1,\"a\":2}");
  EXPECT_EQ(python_json_dumps(chat[0].tool_calls[1].arguments), "{\"z\": 1, \"a\": 2}");
  EXPECT_TRUE(chat[1].tool_calls.empty());
}

TEST(ChatTemplateToolsTest, MalformedMessagesNameTheField) {
  const auto problem_at = [](const char* text) {
    try {
      chat_messages_from_json(ordered_json::parse(text), "messages");
    } catch (const Error& e) {
      return e.input();
    }
    return std::string("no error");
  };
  EXPECT_EQ(problem_at(R"({"role": "user"})"), "messages");
  EXPECT_EQ(problem_at(R"([{"content": "x"}])"), "messages[0]");
  EXPECT_EQ(problem_at(R"([{"role": "user", "content": 3}])"), "messages[0].content");
  EXPECT_EQ(problem_at(R"([{"role": "assistant", "tool_calls": {}}])"), "messages[0].tool_calls");
  EXPECT_EQ(problem_at(R"([{"role": "assistant", "tool_calls": [{"arguments": {}}]}])"),
            "messages[0].tool_calls[0]");
  EXPECT_EQ(problem_at(R"([{"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}])"),
            "messages[0].tool_calls[0].function");
  EXPECT_EQ(problem_at(R"([{"role": "assistant", "tool_calls": [{"function": "f"}]}])"),
            "messages[0].tool_calls[0].function");
}

// Python's repr() of each value (python3 -c 'print(repr(x))').
TEST(ChatTemplateToolsTest, FloatsPrintAsPythonRepr) {
  const std::vector<std::pair<double, std::string>> cases = {
      {0.0, "0.0"},
      {-0.0, "-0.0"},
      {1.0, "1.0"},
      {0.1, "0.1"},
      {-2.5, "-2.5"},
      {1e-4, "0.0001"},
      {1e-5, "1e-05"},
      {1.25e-7, "1.25e-07"},
      {123456789.0, "123456789.0"},
      {1e15, "1000000000000000.0"},
      {9999999999999998.0, "9999999999999998.0"},
      {1e16, "1e+16"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {5e-324, "5e-324"},
      {1.0 / 3.0, "0.3333333333333333"},
      {std::numeric_limits<double>::quiet_NaN(), "NaN"},
      {-std::numeric_limits<double>::infinity(), "-Infinity"}};
  for (const auto& [value, repr] : cases) EXPECT_EQ(python_float_repr(value), repr) << repr;
}

TEST(ChatTemplateToolsTest, JsonDumpsMatchesPython) {
  // python3 -c 'import json; print(json.dumps(v, ensure_ascii=False))' for the same value.
  const ordered_json value = ordered_json::parse(
      R"({"b": [1, -2, 18446744073709551615, 2.0, true, null], "a": {"": "\u0000\u001f\t\"\\/é\u2028"}, "e": [], "o": {}})");
  EXPECT_EQ(python_json_dumps(value),
            "{\"b\": [1, -2, 18446744073709551615, 2.0, true, null], \"a\": {\"\": "
            "\"\\u0000\\u001f\\t\\\"\\\\/é\u2028\"}, \"e\": [], \"o\": {}}");
}

}  // namespace
}  // namespace aspen::tokenizer
