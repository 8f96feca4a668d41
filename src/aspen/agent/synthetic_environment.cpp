#include "aspen/agent/synthetic_environment.h"

#include <chrono>
#include <cmath>
#include <exception>
#include <thread>
#include <utility>

#include "aspen/agent/imports.h"
#include "aspen/util/error.h"
#include "aspen/util/seconds_since.h"

namespace aspen::agent {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// FNV-1a: a stable hash of the row's key (std::hash may differ between libraries).
uint64_t hash_text(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const unsigned char c : text) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

// A uniform draw in (0, 1): never 0, so its logarithm is finite.
double unit_open(uint64_t bits) { return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53; }

// Streams of one episode: latencies and observation digits never share draws.
constexpr uint64_t kLatencyStream = 1;
constexpr uint64_t kDigitStream = 2;

uint64_t draw(uint64_t episode_seed, uint64_t stream, uint64_t index) {
  return splitmix64(splitmix64(episode_seed ^ (stream << 56)) + index);
}

std::string row_key(const nlohmann::ordered_json& row) {
  if (row.is_object() && row.contains("id")) {
    return row["id"].is_string() ? row["id"].get<std::string>() : row["id"].dump();
  }
  return row.dump();
}

}  // namespace

uint64_t SyntheticEpisodeSeeds::next(const std::string& row_key) {
  uint64_t occurrence = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    occurrence = started_[row_key]++;
  }
  return splitmix64(splitmix64(seed_ ^ hash_text(row_key)) + occurrence);
}

uint64_t SyntheticEpisodeSeeds::of_episode(const std::string& row_key,
                                           const EpisodeId& episode) const {
  // The (group, sample) stream is apart from next()'s occurrence counts by a salt.
  const uint64_t row_seed = splitmix64(seed_ ^ hash_text(row_key) ^ 0x9e3779b97f4a7c15ull);
  return splitmix64(splitmix64(row_seed + static_cast<uint64_t>(episode.group)) +
                    static_cast<uint64_t>(episode.sample));
}

double synthetic_tool_latency_s(const SyntheticEnvironmentOptions& options,
                                uint64_t episode_seed, int call) {
  const uint64_t index = 2 * static_cast<uint64_t>(call);
  const double u1 = unit_open(draw(episode_seed, kLatencyStream, index));
  const double u2 = unit_open(draw(episode_seed, kLatencyStream, index + 1));
  const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  return options.tool_latency_ms * 1e-3 * std::exp(options.tool_latency_sigma * z);
}

SyntheticEnvironment::SyntheticEnvironment(std::shared_ptr<SyntheticEpisodeSeeds> seeds,
                                           AnswerVerifier verifier,
                                           SyntheticEnvironmentOptions options)
    : seeds_(std::move(seeds)), verifier_(std::move(verifier)), options_(options) {
  const std::string where = "synthetic environment";
  check_input(seeds_ != nullptr, "no episode seeds", where);
  check_input(static_cast<bool>(verifier_), "no verifier", where);
  check_input(options_.turns >= 1, "turns must be at least 1", where);
  check_input(std::isfinite(options_.tool_latency_ms) && options_.tool_latency_ms >= 0,
              "tool_latency_ms must be a number of milliseconds >= 0", where);
  check_input(std::isfinite(options_.tool_latency_sigma) && options_.tool_latency_sigma >= 0,
              "tool_latency_sigma must be >= 0", where);
  check_input(options_.observation_tokens >= 1, "observation_tokens must be at least 1", where);
}

ResetResult SyntheticEnvironment::reset(const nlohmann::ordered_json& row) {
  return start_episode(row, seeds_->next(row_key(row)));
}

ResetResult SyntheticEnvironment::reset_episode(const nlohmann::ordered_json& row,
                                                const EpisodeId& episode) {
  return start_episode(row, seeds_->of_episode(row_key(row), episode));
}

ResetResult SyntheticEnvironment::start_episode(const nlohmann::ordered_json& row,
                                                uint64_t episode_seed) {
  const std::string where = "synthetic environment: data row";
  ResetResult result;
  result.messages = conversation_of_row(row, where);
  row_ = row;
  episode_seed_ = episode_seed;
  active_ = true;
  turns_ = 0;
  return result;
}

StepResult SyntheticEnvironment::step(const std::string& turn) {
  if (!active_) {
    return failed_step(EnvironmentFault::kRefused,
                       "synthetic environment: step without an episode (call reset first)");
  }
  const int call = turns_++;
  StepResult result;
  const auto start = std::chrono::steady_clock::now();
  if (turns_ >= options_.turns) {
    active_ = false;
    result.done = true;
    try {
      result.reward = verifier_(turn, row_);
    } catch (const std::exception& e) {
      return failed_step(EnvironmentFault::kRefused,
                         std::string("synthetic environment: the verifier failed: ") + e.what());
    }
    result.metrics.wait_seconds = seconds_since(start);
    return result;
  }
  // The "tool call": a wait on something that is not this process's CPU (a remote tool,
  // a sandbox), so it sleeps rather than spins and the engine keeps the cores.
  std::this_thread::sleep_for(
      std::chrono::duration<double>(synthetic_tool_latency_s(options_, episode_seed_, call)));
  std::string digits(static_cast<size_t>(options_.observation_tokens), '0');
  for (size_t i = 0; i < digits.size(); ++i) {
    digits[i] = static_cast<char>('0' + draw(episode_seed_, kDigitStream,
                                             static_cast<uint64_t>(call) << 32 | i) % 10);
  }
  result.metrics.tool_calls = 1;
  result.metrics.observation_bytes = digits.size();
  result.observations.push_back({"tool", std::move(digits)});
  result.metrics.wait_seconds = seconds_since(start);
  return result;
}

}  // namespace aspen::agent
