#include "aspen/serve/chat_tool_reply.h"

#include "aspen/agent/tool_call_parser.h"
#include "aspen/serve/imports.h"
#include "aspen/tokenizer/python_json.h"

namespace aspen::serve {

ToolReply chat_tool_reply(const std::string& text, const std::string& reply_id) {
  ToolReply reply;
  const ParsedTurn turn = parse_tool_calls(text);
  reply.calls = static_cast<int64_t>(turn.calls.size());
  for (const ParsedToolCall& call : turn.calls) reply.malformed += call.ok() ? 0 : 1;
  if (turn.calls.empty() || reply.malformed > 0) {
    reply.content = text;
    return reply;
  }
  reply.content = turn.content;
  if (!reply.content.empty() && reply.content.back() == '\n') reply.content.pop_back();
  reply.tool_calls = nlohmann::json::array();
  for (size_t i = 0; i < turn.calls.size(); ++i) {
    reply.tool_calls.push_back(
        {{"id", "call_" + reply_id + "_" + std::to_string(i)},
         {"type", "function"},
         {"function",
          {{"name", turn.calls[i].call.name},
           {"arguments", python_json_dumps(turn.calls[i].call.arguments)}}}});
  }
  return reply;
}

}  // namespace aspen::serve
