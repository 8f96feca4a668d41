#include "aspen/agent/environment_protocol.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <random>

#include "aspen/agent/imports.h"
#include "aspen/tokenizer/chat_message_json.h"
#include "aspen/util/bounded_json.h"
#include "aspen/util/error.h"
#include "aspen/util/seconds_since.h"

namespace aspen::agent {
namespace {

// As reward/verifier.h's kMaxRewardMagnitude: rewards stay summable into finite means.
constexpr double kMaxReward = 1e6;

std::string quote(std::string_view reply) {
  return reply.size() > 200 ? std::string(reply.substr(0, 200)) + "..." : std::string(reply);
}

// A request as one line; model text that is not valid UTF-8 gets U+FFFD.
std::string line(const nlohmann::ordered_json& request) {
  return request.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// Parses the reply as a JSON object. Sets `error` (garbage or refusal) and returns
// false when the caller should stop.
bool parse_object(std::string_view reply, const std::string& source, nlohmann::ordered_json* out,
                  std::optional<EnvironmentError>* error) {
  try {
    *out = parse_json_bounded_as<nlohmann::ordered_json>(reply, source, 64);
  } catch (const Error& e) {
    *error = EnvironmentError{EnvironmentFault::kGarbage, source + ": reply is not JSON (" +
                                                              e.problem() + "): " + quote(reply)};
    return false;
  }
  if (!out->is_object()) {
    *error = EnvironmentError{EnvironmentFault::kGarbage,
                              source + ": reply is not a JSON object: " + quote(reply)};
    return false;
  }
  if (out->contains("error")) {
    const auto& message = (*out)["error"];
    *error = EnvironmentError{
        EnvironmentFault::kRefused,
        source + ": " + (message.is_string() ? message.get<std::string>() : message.dump())};
    return false;
  }
  return true;
}

// An optional reward field; throws aspen::Error when present and not a bounded number.
std::optional<double> reward_field(const nlohmann::ordered_json& reply, const char* key) {
  if (!reply.contains(key)) return std::nullopt;
  const auto& value = reply[key];
  check_input(value.is_number() && std::isfinite(value.get<double>()) &&
                  std::fabs(value.get<double>()) <= kMaxReward,
              std::string("\"") + key + "\" is not a number in [-1e6, 1e6]", key);
  return value.get<double>();
}

}  // namespace

std::string new_episode_id() {
  // A random prefix per process: ids from two Aspen runs sharing one service differ.
  static const std::string prefix = [] {
    std::random_device device;
    const uint64_t bits = (uint64_t{device()} << 32) ^ device();
    char text[17];
    std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(bits));
    return std::string(text);
  }();
  static std::atomic<uint64_t> next{0};
  return prefix + "-" + std::to_string(next++);
}

std::string reset_request(const std::string& episode, const nlohmann::ordered_json& row) {
  return line({{"op", "reset"}, {"episode", episode}, {"row", row}});
}

std::string step_request(const std::string& episode, const std::string& turn) {
  return line({{"op", "step"}, {"episode", episode}, {"turn", turn}});
}

ResetResult parse_reset_reply(std::string_view reply, const std::string& source) {
  ResetResult result;
  nlohmann::ordered_json parsed;
  if (!parse_object(reply, source, &parsed, &result.error)) return result;
  try {
    check_input(parsed.contains("messages"), "no \"messages\"", "reset reply");
    result.messages = chat_messages_from_json(parsed["messages"], "messages");
    check_input(!result.messages.empty(), "no messages", "messages");
    if (parsed.contains("tools")) {
      check_input(parsed["tools"].is_array(), "not an array", "tools");
      for (const auto& tool : parsed["tools"]) {
        check_input(tool.is_object(), "a tool schema is not an object", "tools");
        result.tools.push_back(tool);
      }
    }
  } catch (const Error& e) {
    result = ResetResult{};
    result.error = EnvironmentError{
        EnvironmentFault::kGarbage,
        source + ": reset reply " + e.input() + ": " + e.problem() +
            " (expected {\"messages\": [...], \"tools\": [...]}): " + quote(reply)};
  } catch (const std::exception& e) {  // not expected: chat_message_json throws Error
    result = ResetResult{};
    result.error = EnvironmentError{EnvironmentFault::kGarbage,
                                    source + ": reset reply: " + e.what() + ": " + quote(reply)};
  }
  return result;
}

StepResult parse_step_reply(std::string_view reply, const std::string& source) {
  StepResult result;
  nlohmann::ordered_json parsed;
  if (!parse_object(reply, source, &parsed, &result.error)) {
    result.done = true;
    return result;
  }
  try {
    check_input(parsed.contains("done") && parsed["done"].is_boolean(), "missing or not a bool",
                "done");
    result.done = parsed["done"].get<bool>();
    if (parsed.contains("observations")) {
      result.observations = chat_messages_from_json(parsed["observations"], "observations");
    }
    for (const ChatMessage& message : result.observations) {
      check_input(message.role == "tool" || message.role == "user",
                  "an observation has role '" + message.role + "'", "observations",
                  "observations are \"tool\" or \"user\" messages");
    }
    for (const ChatMessage& message : result.observations) {
      result.metrics.observation_bytes += message.content.size();
    }
    result.reward = reward_field(parsed, "reward");
    result.turn_reward = reward_field(parsed, "turn_reward");
    if (result.done) {
      check_input(result.observations.empty(), "observations in a step that is done",
                  "observations");
      check_input(result.reward.has_value(), "a step that is done has no reward", "reward");
    } else {
      check_input(!result.observations.empty(), "no observations in a step that is not done",
                  "observations");
      check_input(!result.reward.has_value(), "a reward in a step that is not done", "reward",
                  "use turn_reward for a per-turn reward");
    }
  } catch (const Error& e) {
    result = failed_step(EnvironmentFault::kGarbage,
                         source + ": step reply " + e.input() + ": " + e.problem() +
                             " (expected {\"observations\": [...], \"done\": bool, "
                             "\"reward\": number when done}): " +
                             quote(reply));
  } catch (const std::exception& e) {  // not expected: chat_message_json throws Error
    result = failed_step(EnvironmentFault::kGarbage,
                         source + ": step reply: " + e.what() + ": " + quote(reply));
  }
  return result;
}

ResetResult ProtocolEpisodes::reset(const nlohmann::ordered_json& row, const Exchange& exchange) {
  const auto start = std::chrono::steady_clock::now();
  const std::string episode = new_episode_id();
  episode_.clear();
  ResetResult result;
  const std::string reply = exchange(reset_request(episode, row), &result.error);
  if (!result.error) result = parse_reset_reply(reply, source_);
  if (!result.error) episode_ = episode;
  result.wait_seconds = seconds_since(start);
  return result;
}

StepResult ProtocolEpisodes::step(const std::string& turn, const Exchange& exchange) {
  if (episode_.empty()) {
    return failed_step(EnvironmentFault::kRefused,
                       source_ + ": step without an episode (call reset first)");
  }
  const auto start = std::chrono::steady_clock::now();
  std::optional<EnvironmentError> error;
  const std::string reply = exchange(step_request(episode_, turn), &error);
  StepResult result =
      error ? failed_step(error->fault, error->message) : parse_step_reply(reply, source_);
  if (result.done) episode_.clear();
  result.metrics.wait_seconds = seconds_since(start);
  return result;
}

}  // namespace aspen::agent
