#include "bench/tool_latency_workload.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "aspen/util/error.h"
#include "bench/imports.h"

namespace aspen::bench {
namespace {

// A number of DIST's, or an error naming the part.
double dist_number(const std::string& text, const std::string& what, const std::string& dist) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  check_input(!text.empty() && end == text.c_str() + text.size() && std::isfinite(value) &&
                  value >= 0,
              what + " must be a number >= 0, got \"" + text + "\" in \"" + dist + "\"",
              "bench pipeline --tool-latency", "e.g. --tool-latency lognormal:200:0.5");
  return value;
}

std::string text_of(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// Tokens the template puts around one tool message and the next generation prompt
// ("<|im_end|>\n<|im_start|>user\n<tool_response>\n...\n</tool_response><|im_end|>\n
// <|im_start|>assistant\n" and Qwen3's empty think block): about 75 bytes besides the
// special tokens, so at most that many tokens under any byte-level tokenizer (the
// built-in one learns no merges for text its corpus lacks); room to spare costs nothing.
constexpr int64_t kObservationWrapping = 96;

}  // namespace

void parse_tool_latency(const std::string& dist, ToolLatencyWorkload& workload) {
  std::vector<std::string> parts;
  std::stringstream in(dist);
  for (std::string part; std::getline(in, part, ':');) parts.push_back(part);
  check_input(parts.size() == 3 && parts[0] == "lognormal",
              "expected lognormal:MEDIAN_MS:SIGMA, got \"" + dist + "\"",
              "bench pipeline --tool-latency", "e.g. --tool-latency lognormal:200:0.5");
  workload.median_ms = dist_number(parts[1], "MEDIAN_MS", dist);
  workload.sigma = dist_number(parts[2], "SIGMA", dist);
}

std::vector<std::string> tool_latency_arguments(const ToolLatencyWorkload& workload,
                                                const TrainConfig& base, double median_ms) {
  check_input(workload.turns >= 2, "must be at least 2 (one tool call)",
              "bench pipeline --tool-turns");
  check_input(workload.observation_tokens >= 1, "must be at least 1",
              "bench pipeline --observation-tokens");
  const int64_t calls = workload.turns - 1;
  const int64_t room = workload.turns * base.rollout.max_tokens +
                       calls * (workload.observation_tokens + kObservationWrapping);
  const int64_t in_flight = base.rollout.prompts_per_iteration * base.rollout.n *
                            (std::max<int64_t>(0, base.pipeline.max_staleness) + 1);
  const std::string env = "rollout.environment.";
  return {env + "kind=synthetic",
          env + "chat_template=qwen3",
          env + "synthetic_turns=" + std::to_string(workload.turns),
          env + "max_turns=" + std::to_string(workload.turns),
          env + "observation_tokens=" + std::to_string(workload.observation_tokens),
          env + "tool_latency_ms=" + text_of(median_ms),
          env + "tool_latency_sigma=" + text_of(workload.sigma),
          env + "max_trajectory_tokens=" + std::to_string(room),
          env + "threads=" + std::to_string(std::max<int64_t>(4, in_flight)),
          "rollout.long_tail_fraction=0",
          "simulate.turns=" + std::to_string(workload.turns),
          "simulate.tool_latency_ms=" + text_of(median_ms),
          "simulate.tool_latency_sigma=" + text_of(workload.sigma),
          "simulate.observation_tokens=" + std::to_string(workload.observation_tokens)};
}

}  // namespace aspen::bench
