#include "aspen/pipeline/instance_status.h"

#include <nlohmann/json.hpp>

#include "aspen/pipeline/imports.h"
#include "aspen/util/error.h"

namespace aspen::pipeline {

std::string instance_status_key(int instance) {
  return kInstanceStatusPrefix + std::to_string(instance);
}

std::string encode_instance_status(const InstanceStatus& s) {
  const QueueState& q = s.queue;
  return nlohmann::json{{"instance", s.instance},
                        {"rank", s.rank},
                        {"running", q.running},
                        {"waiting", q.waiting},
                        {"outstanding_tokens", q.outstanding_tokens},
                        {"free_blocks", q.free_blocks},
                        {"total_blocks", q.total_blocks},
                        {"claimed_samples", s.claimed_samples},
                        {"stolen_groups", s.stolen_groups},
                        {"cut_samples", s.cut_samples},
                        {"cut_tokens", s.cut_tokens},
                        {"resumed_samples", s.resumed_samples},
                        {"completed_samples", s.completed_samples},
                        {"completed_prompt_tokens", s.completed_prompt_tokens},
                        {"completed_response_tokens", s.completed_response_tokens},
                        {"busy_seconds", s.busy_seconds},
                        {"tool_wait_seconds", s.tool_wait_seconds},
                        {"environment_errors", s.environment_errors},
                        {"scheduled_tokens", s.scheduled_tokens},
                        {"steps", s.steps},
                        {"version", s.version},
                        {"exited", s.exited},
                        {"trajectory_counters", s.trajectory_counters}}
      .dump();
}

InstanceStatus decode_instance_status(const std::string& encoded) {
  const nlohmann::json j = nlohmann::json::parse(encoded, nullptr, /*allow_exceptions=*/false);
  check_input(j.is_object(), "is not a JSON object", "instance status");
  try {
    InstanceStatus s;
    s.instance = j.at("instance").get<int>();
    s.rank = j.at("rank").get<int>();
    s.queue.running = j.at("running").get<int64_t>();
    s.queue.waiting = j.at("waiting").get<int64_t>();
    s.queue.outstanding_tokens = j.at("outstanding_tokens").get<int64_t>();
    s.queue.free_blocks = j.at("free_blocks").get<int64_t>();
    s.queue.total_blocks = j.at("total_blocks").get<int64_t>();
    s.claimed_samples = j.at("claimed_samples").get<int64_t>();
    s.stolen_groups = j.at("stolen_groups").get<int64_t>();
    s.cut_samples = j.at("cut_samples").get<int64_t>();
    s.cut_tokens = j.at("cut_tokens").get<int64_t>();
    s.resumed_samples = j.at("resumed_samples").get<int64_t>();
    s.completed_samples = j.at("completed_samples").get<int64_t>();
    s.completed_prompt_tokens = j.at("completed_prompt_tokens").get<int64_t>();
    s.completed_response_tokens = j.at("completed_response_tokens").get<int64_t>();
    s.busy_seconds = j.at("busy_seconds").get<double>();
    s.tool_wait_seconds = j.at("tool_wait_seconds").get<double>();
    s.environment_errors = j.at("environment_errors").get<int64_t>();
    s.scheduled_tokens = j.at("scheduled_tokens").get<int64_t>();
    s.steps = j.at("steps").get<int64_t>();
    s.version = j.at("version").get<int64_t>();
    s.exited = j.at("exited").get<bool>();
    if (j.contains("trajectory_counters")) {
      s.trajectory_counters = j.at("trajectory_counters").get<std::map<std::string, int64_t>>();
    }
    return s;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("malformed: ") + e.what(), "instance status");
  }
}

}  // namespace aspen::pipeline
