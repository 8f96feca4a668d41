// The agent endpoint's tool calls, both ways: a reply's <tool_call> blocks become
// OpenAI's tool_calls, and the message an OpenAI client carries back (string arguments,
// null content, tool messages with ids) renders, under the real Qwen3 template, as
// exactly the text the model wrote: the session's prefix rule holds for an honest agent.
#include "aspen/serve/chat_tool_reply.h"

#include <gtest/gtest.h>

#include "aspen/serve/chat_tools.h"
#include "aspen/serve/openai_request.h"
#include "support/oracles.h"

namespace aspen::serve {
namespace {

using nlohmann::ordered_json;

const ordered_json kReplyTools = ordered_json::parse(R"([{"type": "function",
  "function": {"name": "calculator", "description": "Exact arithmetic.",
  "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}}}}])");

// The assistant message as the official client hands it back (model_dump).
ordered_json carried_back(const ToolReply& reply) {
  ordered_json message = {{"role", "assistant"}};
  message["content"] = reply.content.empty() ? ordered_json(nullptr) : ordered_json(reply.content);
  if (!reply.tool_calls.is_null()) {
    message["tool_calls"] = ordered_json::parse(reply.tool_calls.dump());
  }
  return message;
}

TEST(ChatToolReply, CallsCarriedBackByAClientRenderAsTheModelWroteThem) {
  const ChatTemplate chat = ChatTemplate::from_config(testing::qwen3_tokenizer_dir());
  const std::vector<std::string> turns = {
      "<think>\nBig numbers.\n</think>\n\nLet me compute.\n<tool_call>\n{\"name\": \"calculator\", "
      "\"arguments\": {\"expression\": \"2 ** 100\"}}\n</tool_call>",
      "<think>\nTwo at once.\n</think>\n\n<tool_call>\n{\"name\": \"calculator\", \"arguments\": "
      "{\"expression\": \"1/3\", \"note\": \"é\"}}\n</tool_call>\n<tool_call>\n{\"name\": "
      "\"calculator\", \"arguments\": {\"expression\": \"7 // 2\"}}\n</tool_call>"};
  for (const std::string& turn : turns) {
    const ToolReply reply = chat_tool_reply(turn, "r1");
    ASSERT_TRUE(reply.tool_calls.is_array()) << turn;
    EXPECT_EQ(reply.tool_calls[0]["id"], "call_r1_0");
    EXPECT_EQ(reply.tool_calls[0]["type"], "function");
    EXPECT_EQ(reply.tool_calls[0]["function"]["name"], "calculator");
    EXPECT_TRUE(reply.tool_calls[0]["function"]["arguments"].is_string());
    const ordered_json user = {{"role", "user"}, {"content", "Compute."}};
    const ordered_json body = {
        {"messages",
         {user, carried_back(reply),
          {{"role", "tool"}, {"tool_call_id", "call_r1_0"}, {"content", "1"}}}},
        {"tools", kReplyTools}};
    const ChatTools parsed = parse_chat_tools(body, /*stream=*/false);
    EXPECT_TRUE(parsed.parse_calls);
    const std::string prompt =
        chat.render({{"user", "Compute."}}, true, true, parsed.tools);
    const std::string whole = chat.render(parsed.messages, true, true, parsed.tools);
    EXPECT_EQ(whole.compare(0, prompt.size() + turn.size() + 10,
                            prompt + turn + "<|im_end|>"),
              0)
        << whole;
  }
  EXPECT_EQ(chat_tool_reply(turns[1], "r2").tool_calls.size(), 2u);
  EXPECT_EQ(chat_tool_reply(turns[1], "r2").calls, 2);
  EXPECT_EQ(chat_tool_reply(turns[1], "r2").malformed, 0);
}

TEST(ChatToolReply, AMalformedCallOrNoCallIsPlainContent) {
  const std::string broken = "Sure.\n<tool_call>\n{\"name\": \"calculator\", \"arguments\": [1]}\n"
                             "</tool_call>";
  const ToolReply reply = chat_tool_reply(broken, "r");
  EXPECT_TRUE(reply.tool_calls.is_null());
  EXPECT_EQ(reply.content, broken);
  EXPECT_EQ(reply.calls, 1);
  EXPECT_EQ(reply.malformed, 1);
  EXPECT_EQ(chat_tool_reply("Just text.\n", "r").content, "Just text.\n");
  EXPECT_TRUE(chat_tool_reply("Just text.\n", "r").tool_calls.is_null());
}

TEST(ChatTools, RefusesWhatItCannotHonourNamingTheField) {
  auto field = [](const ordered_json& extra, bool stream = false) {
    ordered_json body = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
    body.update(extra);
    try {
      parse_chat_tools(body, stream);
    } catch (const RequestError& error) {
      return error.input();
    }
    return std::string("accepted");
  };
  EXPECT_EQ(field({{"tools", kReplyTools}}), "accepted");
  EXPECT_EQ(field({{"tools", kReplyTools}, {"tool_choice", "none"}}, true), "accepted");
  EXPECT_EQ(field({{"tools", kReplyTools}}, true), "stream");
  EXPECT_EQ(field({{"tool_choice", "required"}}), "tool_choice");
  EXPECT_EQ(field({{"tools", {{{"type", "function"}}}}}), "tools[0]");
  EXPECT_EQ(field({{"messages", {{{"role", "assistant"}, {"tool_calls", {{{"id", "x"}}}}}}}}),
            "messages[0].tool_calls[0]");
  const ChatTools none =
      parse_chat_tools({{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                        {"tools", kReplyTools}, {"tool_choice", "none"}},
                       false);
  EXPECT_FALSE(none.parse_calls);
  EXPECT_EQ(none.tools.size(), 1u);
}

}  // namespace
}  // namespace aspen::serve
