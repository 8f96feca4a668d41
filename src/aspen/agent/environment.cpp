#include "aspen/agent/environment.h"

#include "aspen/agent/imports.h"
#include "aspen/tokenizer/chat_message_json.h"
#include "aspen/util/error.h"

namespace aspen::agent {

std::string environment_fault_name(EnvironmentFault fault) {
  switch (fault) {
    case EnvironmentFault::kNone:
      return "none";
    case EnvironmentFault::kCrash:
      return "crash";
    case EnvironmentFault::kTimeout:
      return "timeout";
    case EnvironmentFault::kGarbage:
      return "garbage";
    case EnvironmentFault::kOversized:
      return "oversized";
    case EnvironmentFault::kRefused:
      return "refused";
  }
  return "unknown";
}

std::vector<ChatMessage> conversation_of_row(const nlohmann::ordered_json& row,
                                             const std::string& where) {
  if (row.is_object() && row.contains("messages")) {
    std::vector<ChatMessage> messages = chat_messages_from_json(row["messages"], where + ".messages");
    check_input(!messages.empty(), "no messages", where + ".messages");
    return messages;
  }
  if (row.is_object() && row.contains("prompt") && row["prompt"].is_string()) {
    return {{"user", row["prompt"].get<std::string>()}};
  }
  throw Error("has neither \"messages\" nor a string \"prompt\"", where,
              "give each row {\"prompt\": \"...\"} or {\"messages\": [...]}");
}

StepResult failed_step(EnvironmentFault fault, std::string message) {
  StepResult result;
  result.done = true;
  result.error = EnvironmentError{fault, std::move(message)};
  return result;
}

}  // namespace aspen::agent
