// The tool-call parser (agent/tool_call_parser.h). Input: a model's turn, any bytes.
// Checks: parse_tool_calls never throws (not even aspen::Error: a malformed call is an
// error value); one entry per <tool_call> opening tag, in order, inside the text; a
// well-formed call has a non-empty name and object arguments that print as Python's
// json.dumps (agent observations and prompts print them), and ends with </tool_call>.
#include <exception>
#include <string>

#include "aspen/agent/tool_call_parser.h"
#include "aspen/tokenizer/python_json.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  aspen::agent::ParsedTurn turn;
  try {
    turn = aspen::agent::parse_tool_calls(text);
  } catch (const std::exception& e) {
    aspen::fuzz::defect(std::string("parse_tool_calls threw ") + aspen::fuzz::type_name(typeid(e)) +
                        ": " + e.what());
  }
  size_t tags = 0;
  for (size_t at = text.find(aspen::agent::kToolCallOpen); at != std::string::npos;
       at = text.find(aspen::agent::kToolCallOpen, at + 1)) {
    ++tags;
  }
  aspen::fuzz::require(turn.calls.size() == tags, "one entry per <tool_call> tag");
  aspen::fuzz::require(turn.content == text.substr(0, text.find(aspen::agent::kToolCallOpen)),
                       "content is the text before the first call");
  size_t previous_end = 0;
  for (const auto& call : turn.calls) {
    aspen::fuzz::require(
        call.begin >= previous_end && call.begin < call.end && call.end <= text.size(),
        "calls are in order and inside the text");
    previous_end = call.end;
    if (!call.ok()) continue;
    aspen::fuzz::require(!call.call.name.empty() && call.call.arguments.is_object(),
                         "a well-formed call has a name and object arguments");
    aspen::fuzz::require(
        text.compare(call.end - aspen::agent::kToolCallClose.size(),
                     aspen::agent::kToolCallClose.size(), aspen::agent::kToolCallClose) == 0,
        "a well-formed call ends with </tool_call>");
    ASPEN_FUZZ_CONTRACT(aspen::tokenizer::python_json_dumps(call.call.arguments));
  }
  return 0;
}
