// The tool-call parser (agent/tool_call_parser.h): every <tool_call> block of a turn, in
// order, as a call or as an error that says what is wrong; never a throw, whatever the
// text (random fragments, every truncation of a real turn, hostile JSON).
#include "aspen/agent/tool_call_parser.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "aspen/tokenizer/chat_template.h"
#include "aspen/tokenizer/python_json.h"

namespace aspen::agent {
namespace {

using nlohmann::ordered_json;

size_t count_open_tags(const std::string& text) {
  size_t count = 0;
  for (size_t at = text.find(kToolCallOpen); at != std::string::npos;
       at = text.find(kToolCallOpen, at + 1)) {
    ++count;
  }
  return count;
}

// The parser's contract on any text, checked for every input of the robustness tests.
void expect_contract(const std::string& text) {
  ParsedTurn turn;
  ASSERT_NO_THROW(turn = parse_tool_calls(text)) << text;
  ASSERT_EQ(turn.calls.size(), count_open_tags(text)) << text;
  EXPECT_EQ(turn.content, text.substr(0, text.find(kToolCallOpen)));
  size_t previous_end = 0;
  for (const ParsedToolCall& call : turn.calls) {
    EXPECT_GE(call.begin, previous_end);
    EXPECT_LE(call.end, text.size());
    EXPECT_EQ(text.compare(call.begin, kToolCallOpen.size(), kToolCallOpen), 0);
    previous_end = call.end;
    if (call.ok()) {
      EXPECT_FALSE(call.call.name.empty());
      EXPECT_TRUE(call.call.arguments.is_object());
      EXPECT_EQ(
          text.compare(call.end - kToolCallClose.size(), kToolCallClose.size(), kToolCallClose), 0);
      // A well-formed call's arguments print (the python tool or the template would).
      EXPECT_NO_THROW(python_json_dumps(call.call.arguments));
    }
  }
}

TEST(ToolCallParserTest, ParsesSeveralCallsAndTheContentBeforeThem) {
  const std::string text =
      "<think>\nneed two sums\n</think>\n\nLet me compute.\n<tool_call>\n"
      "{\"name\": \"calculator\", \"arguments\": {\"expression\": \"2**100\"}}\n</tool_call>\n"
      "<tool_call>{\"arguments\": {\"z\": 1, \"a\": [true, null]}, \"name\": "
      "\"other\"}</tool_call>";
  const ParsedTurn turn = parse_tool_calls(text);
  EXPECT_EQ(turn.content, "<think>\nneed two sums\n</think>\n\nLet me compute.\n");
  ASSERT_EQ(turn.calls.size(), 2u);
  EXPECT_TRUE(turn.calls[0].ok()) << turn.calls[0].error;
  EXPECT_EQ(turn.calls[0].call.name, "calculator");
  EXPECT_EQ(turn.calls[0].call.arguments, ordered_json({{"expression", "2**100"}}));
  EXPECT_EQ(turn.calls[0].begin, text.find("<tool_call>"));
  EXPECT_EQ(text.substr(turn.calls[0].end, 12), "\n<tool_call>");
  ASSERT_TRUE(turn.calls[1].ok()) << turn.calls[1].error;
  // The arguments keep the model's key order.
  EXPECT_EQ(python_json_dumps(turn.calls[1].call.arguments), "{\"z\": 1, \"a\": [true, null]}");
  EXPECT_EQ(turn.calls[1].end, text.size());
  expect_contract(text);
}

TEST(ToolCallParserTest, TextWithoutCallsIsAllContent) {
  const ParsedTurn turn = parse_tool_calls("The answer is 4. </tool_call> is not a call.");
  EXPECT_TRUE(turn.calls.empty());
  EXPECT_EQ(turn.content, "The answer is 4. </tool_call> is not a call.");
  EXPECT_TRUE(parse_tool_calls("").calls.empty());
}

TEST(ToolCallParserTest, MissingArgumentsMeansNone) {
  const ParsedTurn turn = parse_tool_calls("<tool_call>{\"name\": \"now\"}</tool_call>");
  ASSERT_EQ(turn.calls.size(), 1u);
  ASSERT_TRUE(turn.calls[0].ok());
  EXPECT_EQ(turn.calls[0].call.arguments, ordered_json::object());
}

std::string call_error_of(const std::string& body) {
  const ParsedTurn turn = parse_tool_calls("<tool_call>" + body + "</tool_call>");
  EXPECT_EQ(turn.calls.size(), 1u);
  return turn.calls.empty() ? "" : turn.calls[0].error;
}

TEST(ToolCallParserTest, MalformedCallsGetErrorsThatSayWhy) {
  EXPECT_EQ(call_error_of("\n\n"),
            "empty <tool_call>: expected {\"name\": ..., \"arguments\": {...}}");
  EXPECT_EQ(call_error_of("{\"name\": \"f\", \"arguments\": {\"x\": 1}").substr(0, 37),
            "invalid tool call: malformed JSON: [j");
  EXPECT_NE(call_error_of("{\"name\": \"f\"} trailing").find("malformed JSON"), std::string::npos);
  EXPECT_NE(call_error_of("{\"name\": \"f\", \"name\": \"g\"}").find("duplicate key \"name\""),
            std::string::npos);
  EXPECT_EQ(call_error_of("[1, 2]"),
            "the tool call must be a JSON object {\"name\": ..., \"arguments\": {...}}, got array");
  EXPECT_EQ(call_error_of("{\"arguments\": {}}"), "the tool call has no \"name\"");
  EXPECT_EQ(call_error_of("{\"name\": 3}"), "the tool call's \"name\" must be a non-empty string");
  EXPECT_EQ(call_error_of("{\"name\": \"\"}"),
            "the tool call's \"name\" must be a non-empty string");
  EXPECT_EQ(call_error_of("{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}"),
            "the tool call's \"arguments\" must be a JSON object, got string");
  EXPECT_NE(call_error_of(std::string(100'000, '[')).find("nested deeper than 512"),
            std::string::npos);
  EXPECT_NE(call_error_of("{\"name\": \"f\xff\"}").find("malformed JSON"), std::string::npos);
}

TEST(ToolCallParserTest, UnterminatedCallsAreErrorsAndLaterCallsStillParse) {
  const std::string text =
      "a<tool_call>{\"name\": \"f\"}<tool_call>{\"name\": \"g\"}</tool_call><tool_call>{\"name\"";
  const ParsedTurn turn = parse_tool_calls(text);
  ASSERT_EQ(turn.calls.size(), 3u);
  EXPECT_EQ(turn.calls[0].error,
            "unterminated <tool_call>: another <tool_call> began before </tool_call>");
  EXPECT_EQ(turn.calls[0].end, text.find("<tool_call>", 2));
  EXPECT_TRUE(turn.calls[1].ok());
  EXPECT_EQ(turn.calls[1].call.name, "g");
  EXPECT_EQ(turn.calls[2].error, "unterminated <tool_call>: the turn ended before </tool_call>");
  EXPECT_EQ(turn.calls[2].end, text.size());
  EXPECT_EQ(turn.content, "a");
}

// What the chat template renders for a message's tool calls parses back to those calls.
TEST(ToolCallParserTest, TemplateRenderedCallsParseBack) {
  ChatMessage assistant{"assistant", "Two calls."};
  assistant.tool_calls.push_back({"calculator", ordered_json{{"expression", "7/2"}}});
  assistant.tool_calls.push_back({"python", ordered_json{{"code", "print(\"</tool\")\n"}}});
  for (const std::string family : {"qwen3", "qwen2.5"}) {
    const std::string text =
        ChatTemplate::builtin(family).render({{"user", "q"}, assistant}, false);
    const size_t start = text.rfind("<|im_start|>assistant\n") + 22;
    const ParsedTurn turn = parse_tool_calls(text.substr(start, text.rfind("<|im_end|>") - start));
    ASSERT_EQ(turn.calls.size(), 2u) << family;
    for (size_t i = 0; i < 2; ++i) {
      ASSERT_TRUE(turn.calls[i].ok()) << turn.calls[i].error;
      EXPECT_EQ(turn.calls[i].call.name, assistant.tool_calls[i].name);
      EXPECT_EQ(turn.calls[i].call.arguments, assistant.tool_calls[i].arguments);
    }
  }
}

TEST(ToolCallParserTest, EveryTruncationOfARealTurnKeepsTheContract) {
  const std::string text =
      "I will call two tools.\n<tool_call>\n{\"name\": \"calculator\", \"arguments\": "
      "{\"expression\": \"(12345678901234567890 * 98765) // 7\"}}\n</tool_call>\n<tool_call>\n"
      "{\"name\": \"python\", \"arguments\": {\"code\": \"print('h\\u00e9llo \u4e2d')\"}}\n"
      "</tool_call>";
  for (size_t length = 0; length <= text.size(); ++length) {
    const std::string prefix = text.substr(0, length);
    expect_contract(prefix);
    const ParsedTurn turn = parse_tool_calls(prefix);
    // Complete blocks before the cut still parse.
    const size_t first_close = text.find("</tool_call>") + 12;
    if (length >= first_close) {
      ASSERT_GE(turn.calls.size(), 1u);
      EXPECT_TRUE(turn.calls[0].ok()) << length;
    }
    if (length == text.size()) {
      ASSERT_EQ(turn.calls.size(), 2u);
      EXPECT_TRUE(turn.calls[1].ok());
    }
  }
}

TEST(ToolCallParserTest, RandomTextNeverThrowsAndKeepsTheContract) {
  const std::vector<std::string> fragments = {"<tool_call>",
                                              "</tool_call>",
                                              "<tool_call",
                                              "tool_call>",
                                              "{",
                                              "}",
                                              "[",
                                              "]",
                                              "\"",
                                              "\"name\"",
                                              "\"arguments\"",
                                              ":",
                                              ",",
                                              " ",
                                              "\n",
                                              "\"calculator\"",
                                              "1",
                                              "-2.5e3",
                                              "true",
                                              "null",
                                              "\\",
                                              "\\u",
                                              "\xff",
                                              "\xe4\xb8",
                                              "\xe4\xb8\xad",
                                              "<",
                                              ">",
                                              "/",
                                              "{\"name\": \"f\", \"arguments\": {}}",
                                              std::string("\0", 1)};
  std::mt19937_64 rng(35);
  for (int i = 0; i < 20'000; ++i) {
    std::string text;
    const size_t pieces = rng() % 40;
    for (size_t k = 0; k < pieces; ++k) {
      if (rng() % 8 == 0) {
        text += static_cast<char>(rng() % 256);  // any byte
      } else {
        text += fragments[rng() % fragments.size()];
      }
    }
    expect_contract(text);
    if (::testing::Test::HasFailure()) break;
  }
}

}  // namespace
}  // namespace aspen::agent
