#include "aspen/agent/observation_suffix.h"

#include <string_view>

#include "aspen/agent/imports.h"
#include "aspen/util/error.h"

namespace aspen::agent {
namespace {

// Content no template rewrites (no whitespace at its ends, no <think>) and no
// observation of the probe contains before it.
constexpr std::string_view kMarker = "ASPEN-ASSISTANT-TURN-END-MARKER";
constexpr std::string_view kEndOfTurn = "<|im_end|>";

}  // namespace

ObservationSuffix observation_suffix(const ChatTemplate& chat_template,
                                     const std::vector<ChatMessage>& observations,
                                     bool enable_thinking) {
  const std::string where = "observation suffix";
  check_input(!observations.empty(), "no observations", where);
  for (const ChatMessage& message : observations) {
    check_input(message.role == "tool" || message.role == "user",
                "an observation has role '" + message.role + "'", where,
                "observations are \"tool\" or \"user\" messages");
  }
  std::vector<ChatMessage> probe = {{"user", "?"}, {"assistant", std::string(kMarker)}};
  probe.insert(probe.end(), observations.begin(), observations.end());
  const std::string rendered = chat_template.render(probe, true, enable_thinking);
  const size_t marker = rendered.find(kMarker);
  check_input(marker != std::string::npos, "the template dropped the assistant turn", where);
  const std::string_view after = std::string_view(rendered).substr(marker + kMarker.size());
  check_input(after.substr(0, kEndOfTurn.size()) == kEndOfTurn,
              "template '" + chat_template.name() + "' does not end an assistant turn with " +
                  std::string(kEndOfTurn),
              where);
  return {std::string(kEndOfTurn), std::string(after.substr(kEndOfTurn.size()))};
}

}  // namespace aspen::agent
