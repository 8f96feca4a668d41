#include "aspen/agent/agent_program.h"

#include <cmath>
#include <optional>
#include <sstream>

#include "aspen/agent/imports.h"
#include "aspen/util/bounded_json.h"
#include "aspen/util/error.h"

namespace aspen::agent {
namespace {

// Bytes of program output quoted in a one-line error: printable, newlines as "\n".
std::string quoted(const std::string& text, size_t limit, bool tail) {
  const std::string part =
      text.size() <= limit ? text : tail ? text.substr(text.size() - limit) : text.substr(0, limit);
  std::string line;
  for (const char c : part) {
    if (c == '\n') {
      line += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      line += ' ';
    } else {
      line += c;
    }
  }
  return (tail && text.size() > limit ? "..." : "") + line +
         (!tail && text.size() > limit ? "..." : "");
}

std::string with_stderr(std::string error, const AgentProcessRun& process) {
  if (process.err.empty()) return error;
  return error + "; stderr: " + quoted(process.err, 300, /*tail=*/true);
}

std::string seconds(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

}  // namespace

std::string agent_fault_metric(AgentFault fault) {
  switch (fault) {
    case AgentFault::kNone:
      return "";
    case AgentFault::kTimeout:
      return "agent_timeouts";
    case AgentFault::kCrash:
      return "agent_crashes";
    case AgentFault::kGarbage:
      return "agent_garbage";
    case AgentFault::kOversized:
      return "agent_oversized";
    case AgentFault::kNoCalls:
      return "agent_no_calls";
    case AgentFault::kCancelled:
      return "agent_cancelled";
  }
  return "";
}

RewardLine parse_reward_line(const std::string& stdout_text) {
  RewardLine line;
  std::string text = stdout_text;
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (text.empty()) {
    line.error = "printed no reward line (expected {\"reward\": x} on stdout)";
    return line;
  }
  if (text.find('\n') != std::string::npos) {
    line.error = "printed more than one line on stdout (only {\"reward\": x} belongs there; "
                 "log to stderr): " + quoted(text, 200, false);
    return line;
  }
  try {
    const nlohmann::json value = parse_json_bounded_as<nlohmann::json>(text, "reward line", 4);
    if (!value.is_object() || !value.contains("reward") || value.size() != 1) {
      throw Error("expected {\"reward\": x}", "reward line");
    }
    const nlohmann::json& reward = value["reward"];
    if (!reward.is_number() || !std::isfinite(reward.get<double>()) ||
        std::abs(reward.get<double>()) > 1e6) {
      throw Error("the reward must be a finite number within [-1e6, 1e6]", "reward line");
    }
    line.reward = reward.get<double>();
  } catch (const Error& error) {
    line.error = "printed a bad reward line (" + error.problem() + "): " + quoted(text, 200, false);
  }
  return line;
}

AgentProgram::AgentProgram(AgentProgramOptions options, AgentSessions& sessions)
    : options_(std::move(options)), sessions_(sessions) {
  check_input(!options_.command.empty(), "no agent program given", "rollout.agent.command");
  check_input(options_.max_concurrent >= 1, "must be >= 1", "agent programs at once");
  check_input(options_.timeout_s > 0, "must be > 0", "agent program timeout");
}

void AgentProgram::cancel() {
  {
    MutexLock lock(mutex_);
    cancelled_ = true;
  }
  slot_free_.notify_all();
}

AgentEpisode AgentProgram::run(const nlohmann::ordered_json& row,
                               const std::function<void(const std::string& session)>& opened) {
  {
    MutexLock lock(mutex_);
    while (running_ >= options_.max_concurrent && !cancelled_) slot_free_.wait(mutex_);
    if (cancelled_) {
      ++metrics_["agent_episodes"];
      ++metrics_["agent_cancelled"];
      AgentEpisode episode;
      episode.fault = AgentFault::kCancelled;
      episode.error = "agent program not started: the run is over";
      return episode;
    }
    ++running_;
  }
  struct Slot {
    AgentProgram& program;
    ~Slot() {
      {
        MutexLock lock(program.mutex_);
        --program.running_;
      }
      program.slot_free_.notify_one();
    }
  } slot{*this};

  const std::string session = sessions_.open();
  if (opened) opened(session);
  AgentProcessLimits limits;
  limits.cancel = &cancelled_;
  limits.wall_seconds = options_.timeout_s;
  limits.max_stdout_bytes = options_.max_stdout_bytes;
  limits.max_stderr_bytes = options_.max_stderr_bytes;
  AgentProcessRun process;
  std::string start_error;
  // The session ends when the program prints its reward (a call after it is late), or
  // when the program ends without one.
  std::optional<ClosedSession> closed;
  const auto close_session = [&] {
    if (!closed) closed = sessions_.close(session);
  };
  try {
    process = run_agent_process(options_.command, row.dump() + "\n",
                                {"OPENAI_BASE_URL=" + options_.base_url,
                                 "OPENAI_API_KEY=" + options_.api_key, "ASPEN_SESSION=" + session},
                                limits, close_session);
  } catch (const Error& error) {
    start_error = error.what();
  }
  close_session();
  AgentEpisode episode;
  if (!start_error.empty()) {
    episode.session = session;
    episode.fault = AgentFault::kCrash;
    episode.error = "the agent program could not start: " + start_error;
  } else {
    episode = finish(session, process, std::move(*closed));
  }
  MutexLock lock(mutex_);
  ++metrics_["agent_episodes"];
  if (!episode.ok()) ++metrics_[agent_fault_metric(episode.fault)];
  return episode;
}

AgentEpisode AgentProgram::finish(const std::string& session, const AgentProcessRun& process,
                                  ClosedSession closed) const {
  AgentEpisode episode;
  episode.session = session;
  episode.segments = std::move(closed.segments);
  episode.turns = closed.turns;
  for (const AgentSegment& segment : episode.segments) {
    episode.tool_calls += segment.tool_calls;
    episode.tool_errors += segment.tool_errors;
  }
  episode.prefix_breaks = closed.prefix_breaks;
  episode.wall_s = process.wall_seconds;
  const auto fail = [&](AgentFault fault, std::string error) {
    episode.fault = fault;
    episode.error = "agent program " + std::move(error);
    return episode;
  };
  if (process.cancelled) {
    return fail(AgentFault::kCancelled, "was killed: the run is over");
  }
  if (process.timed_out) {
    return fail(AgentFault::kTimeout,
                with_stderr("timed out after " + seconds(options_.timeout_s) +
                                " s (its process group was killed)",
                            process));
  }
  if (process.out_bytes > options_.max_stdout_bytes) {
    return fail(AgentFault::kOversized,
                "printed " + std::to_string(process.out_bytes) + " bytes on stdout, over the " +
                    std::to_string(options_.max_stdout_bytes) +
                    " allowed (only {\"reward\": x} belongs there; log to stderr)");
  }
  if (!process.exited) {
    return fail(AgentFault::kCrash,
                with_stderr("was killed by signal " + std::to_string(process.signal), process));
  }
  if (process.exit_code != 0) {
    return fail(AgentFault::kCrash,
                with_stderr("exited with status " + std::to_string(process.exit_code), process));
  }
  const RewardLine reward = parse_reward_line(process.out);
  if (!reward.error.empty()) return fail(AgentFault::kGarbage, with_stderr(reward.error, process));
  if (episode.turns == 0) {
    return fail(AgentFault::kNoCalls,
                "made no call with its session id (ASPEN_SESSION, as `user` or the "
                "X-Aspen-Session header): nothing to train on; calls with another session id "
                "are refused and counted in agent_unknown_session_calls");
  }
  episode.reward = reward.reward;
  return episode;
}

std::map<std::string, int64_t> AgentProgram::metrics() const {
  MutexLock lock(mutex_);
  std::map<std::string, int64_t> metrics = {{"agent_episodes", 0}, {"agent_timeouts", 0},
                                            {"agent_crashes", 0},  {"agent_garbage", 0},
                                            {"agent_oversized", 0}, {"agent_no_calls", 0},
                                            {"agent_cancelled", 0}};
  for (const auto& [name, value] : metrics_) metrics[name] = value;
  return metrics;
}

}  // namespace aspen::agent
