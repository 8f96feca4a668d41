#include "aspen/reward/command_reward.h"

#include <chrono>
#include <cmath>

#include "aspen/reward/imports.h"
#include "aspen/reward/json_options.h"
#include "aspen/util/bounded_json.h"
#include "aspen/util/error.h"

namespace aspen::reward {
namespace {

std::string request_line(const RewardInput& input, uint64_t request_id) {
  nlohmann::json request = external_reward_request(input);
  request["request_id"] = request_id;
  // Model output need not be valid UTF-8: replace what is not, as json_for_message does.
  return request.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The score of one reply line; aspen::Error quoting the line when it is malformed, out
// of bounds, or echoes another request's request_id.
double parse_reply(const std::string& line, size_t index, uint64_t request_id,
                   const std::string& command) {
  const std::string where = "reward command `" + command + "`, reply " + std::to_string(index + 1);
  const std::string quoted = line.size() > 200 ? line.substr(0, 200) + "..." : line;
  nlohmann::json reply;
  try {
    reply = parse_json_bounded(line, where, 64);
  } catch (const Error&) {
    throw Error("reply is not JSON: " + quoted, where,
                "print one {\"score\": number} line per input line, and nothing else to stdout");
  }
  check_input(reply.is_object() && reply.contains("score") && reply["score"].is_number(),
              "reply has no numeric \"score\": " + quoted, where,
              "print one {\"score\": number} line per input line");
  // Optional, but when present it must be this request's: the one check that catches
  // replies out of step with requests whatever the script's timing.
  check_input(!reply.contains("request_id") || reply["request_id"] == request_id,
              "reply answers request_id " +
                  (reply.contains("request_id") ? reply["request_id"].dump() : "") +
                  " where request_id " + std::to_string(request_id) + " was sent: " + quoted,
              where, "print exactly one reply per input line, in order, echoing its request_id");
  const double score = reply["score"].get<double>();
  check_input(std::isfinite(score), "score is not finite: " + quoted, where);
  check_input(std::fabs(score) <= kMaxRewardMagnitude,
              "score " + reply["score"].dump() + " is outside [-1e6, 1e6]: " + quoted, where,
              "rewards are bounded so that their means stay finite (docs/rewards.md)");
  check_input(!reply.contains("extra") || reply["extra"].is_object(),
              "\"extra\" is not an object: " + quoted, where);
  return score;
}

}  // namespace

CommandRewardOptions CommandRewardOptions::from_json(const nlohmann::json& options) {
  JsonOptions reader(options, "verifier options (command)");
  CommandRewardOptions parsed;
  parsed.command = reader.string("command", "");
  parsed.timeout_s = reader.number("timeout_s", parsed.timeout_s);
  parsed.max_restarts = static_cast<int>(reader.integer("max_restarts", parsed.max_restarts));
  reader.check_no_unknown_keys();
  check_input(!parsed.command.empty(), "no command", reader.path("command"),
              "e.g. command: python3 my_reward.py");
  check_input(std::isfinite(parsed.timeout_s) && parsed.timeout_s > 0 &&
                  parsed.timeout_s <= 86400,
              "must be in (0, 86400] seconds", reader.path("timeout_s"));
  check_input(parsed.max_restarts >= 0 && parsed.max_restarts <= 100, "must be in [0, 100]",
              reader.path("max_restarts"));
  return parsed;
}

CommandReward::CommandReward(CommandRewardOptions options)
    : options_(std::move(options)), process_(options_.command) {}

double CommandReward::score(const RewardInput& input) const { return score_batch({input})[0]; }

int CommandReward::processes_started() const {
  MutexLock lock(mutex_);
  return process_.starts();
}

std::vector<double> CommandReward::score_batch(const std::vector<RewardInput>& inputs) const {
  if (inputs.empty()) return {};
  const uint64_t first_id = next_request_id_.fetch_add(inputs.size());
  std::vector<std::string> requests;
  requests.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    requests.push_back(request_line(inputs[i], first_id + i));
  }
  MutexLock lock(mutex_);
  std::vector<std::string> replies;
  for (int attempt = 0;; ++attempt) {
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(options_.timeout_s));
    try {
      replies = process_.exchange(requests, deadline);
      break;
    } catch (const UnrequestedOutput& e) {
      // Lines beyond one per request are a bug in the script: a retry on a fresh child
      // would hide it (and the scores it may have shifted already), so it stops here.
      throw Error(e.problem(), "reward command `" + options_.command + "`",
                  "print one {\"score\": number} line per input line; diagnostics go to stderr");
    } catch (const Error& e) {
      // A crash or a hang may be transient (a leak, a flaky service behind it): retry
      // the batch on a fresh child; the process was killed by exchange().
      if (attempt >= options_.max_restarts) {
        throw Error(std::string(e.problem()) + " (" + std::to_string(attempt + 1) +
                        " attempts, batch of " + std::to_string(inputs.size()) + ")",
                    "reward command `" + options_.command + "`",
                    "run the command by hand with one input line to see its error");
      }
    }
  }
  std::vector<double> scores;
  scores.reserve(replies.size());
  for (size_t i = 0; i < replies.size(); ++i) {
    scores.push_back(parse_reply(replies[i], i, first_id + i, options_.command));
  }
  return scores;
}

}  // namespace aspen::reward
