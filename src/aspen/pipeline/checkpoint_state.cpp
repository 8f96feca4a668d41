#include "aspen/pipeline/checkpoint_state.h"

#include <cmath>
#include <map>

#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/prompt_source.h"
#include "aspen/util/bounded_json.h"
#include "aspen/util/error.h"

namespace aspen::pipeline {
namespace {

// state.json nests four levels; a little room for what later versions add.
constexpr int kStateDepth = 16;

const nlohmann::json& field(const nlohmann::json& object, const char* key,
                            const std::string& where, const std::string& source) {
  check_input(object.is_object(), where + " is not an object", source);
  const auto it = object.find(key);
  check_input(it != object.end(), where + " has no \"" + key + "\"", source);
  return *it;
}

int64_t count_field(const nlohmann::json& object, const char* key, const std::string& where,
                    const std::string& source, int64_t minimum) {
  const nlohmann::json& value = field(object, key, where, source);
  check_input(value.is_number_integer() && value.get<int64_t>() >= minimum,
              where + "." + key + " must be an integer >= " + std::to_string(minimum) +
                  " (got " + value.dump() + ")",
              source);
  return value.get<int64_t>();
}

double number_field(const nlohmann::json& object, const char* key, const std::string& where,
                    const std::string& source, double low, double high) {
  const nlohmann::json& value = field(object, key, where, source);
  check_input(value.is_number() && std::isfinite(value.get<double>()) &&
                  value.get<double>() >= low && value.get<double>() <= high,
              where + "." + key + " must be a number in [" + std::to_string(low) + ", " +
                  (std::isinf(high) ? std::string("inf") : std::to_string(high)) + "] (got " +
                  value.dump() + ")",
              source);
  return value.get<double>();
}

void check_engine(const nlohmann::json& engine, const std::string& source) {
  const std::string where = "schedule.schedule";
  const nlohmann::json& prompts = field(engine, "prompts", where, source);
  PromptSource::check_state(prompts, source);
  std::map<int64_t, int64_t> open;
  for (const auto& entry : prompts.at("open")) open[entry.at(0)] = entry.at(1);
  const nlohmann::json& pending = field(engine, "pending", where, source);
  check_input(pending.is_array(), where + ".pending is not an array", source);
  for (const nlohmann::json& entry : pending) {
    check_input(entry.is_array() && entry.size() == 2 && entry[0].is_number_integer() &&
                    entry[1].is_number_integer(),
                where + ".pending holds " + entry.dump() + ", not [group_id, example]", source);
    const auto it = open.find(entry[0].get<int64_t>());
    check_input(it != open.end() && it->second == entry[1].get<int64_t>(),
                where + ".pending group " + entry.dump() + " is not an open prompt group",
                source);
  }
  for (const char* key : {"version", "samples", "trained_tokens"}) {
    count_field(engine, key, where, source, 0);
  }
  // The schedules before the iteration engine counted trained_groups; their
  // checkpoints are not resumed (the engine's admission needs consumed and refilled).
  check_input(engine.contains("consumed_groups") || !engine.contains("trained_groups"),
              where + " is a checkpoint of the schedules before the iteration engine "
                      "(trained_groups, no consumed_groups)",
              source, "start the run again; this Aspen resumes only its own checkpoints");
  for (const char* key : {"consumed_groups", "refilled_groups"}) {
    count_field(engine, key, where, source, 0);
  }
  number_field(engine, "kl_reward_coef", where, source, 0.0, HUGE_VAL);
}

}  // namespace

CheckpointState read_checkpoint_state(std::string_view text, const std::string& source,
                                      std::optional<int64_t> directory_iteration) {
  const nlohmann::json state = parse_json_bounded(text, source, kStateDepth);
  CheckpointState parsed;
  parsed.iteration = count_field(state, "iteration", "state", source, 1);
  check_input(!directory_iteration || *directory_iteration == parsed.iteration,
              "iteration is " + std::to_string(parsed.iteration) +
                  " but its directory is the checkpoint of iteration " +
                  std::to_string(directory_iteration.value_or(0)),
              source, "state.json was edited or copied from another checkpoint");
  const nlohmann::json& schedule = field(state, "schedule", "state", source);
  const nlohmann::json& evals = field(schedule, "evals", "schedule", source);
  for (const char* key : {"initial", "before", "after"}) {
    number_field(evals, key, "schedule.evals", source, 0.0, 1.0);
  }
  const nlohmann::json& engine = field(schedule, "schedule", "schedule", source);
  check_engine(engine, source);
  // Every iteration trains the policy once (a step with no batch included), so the
  // policy version is the number of iterations done: a state that says otherwise was
  // edited, and would resume with the wrong rollout window.
  check_input(engine.at("version").get<int64_t>() == parsed.iteration,
              "schedule.schedule.version is " + engine.at("version").dump() + " but iteration is " +
                  std::to_string(parsed.iteration) +
                  " (the policy version counts the iterations trained)",
              source);
  parsed.schedule = schedule;
  return parsed;
}

}  // namespace aspen::pipeline
