#include "aspen/pipeline/resume_check.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <vector>

#include "aspen/pipeline/imports.h"
#include "aspen/util/error.h"

namespace aspen::pipeline {
namespace {

// A state field and the per-iteration metrics field that sums to it.
struct SummedField {
  const char* state_key;
  const char* line_key;
};
constexpr SummedField kSummedFields[] = {{"samples", "rows"},
                                         {"trained_tokens", "trained_tokens"},
                                         {"consumed_groups", "trained_groups"}};

// What metrics.jsonl says about iterations 1..N.
struct MetricsThrough {
  std::map<std::string, int64_t> sums;  // by line key, only where every line has it
  std::optional<double> eval_before;    // the "eval" line of iteration 0
  std::optional<double> eval_after;     // the last eval_accuracy of lines 1..N
};

MetricsThrough read_metrics_through(int64_t iteration, const std::string& metrics_path,
                                    const std::string& checkpoint) {
  const std::string hint =
      "resume in the run directory that wrote " + checkpoint + ", with the metrics.jsonl it wrote";
  check_input(std::filesystem::is_regular_file(metrics_path),
              "is missing; the checkpoint after iteration " + std::to_string(iteration) +
                  " needs its lines of iterations 1.." + std::to_string(iteration),
              metrics_path, hint);
  std::ifstream in(metrics_path);
  check_input(in.good(), "cannot be read", metrics_path);
  MetricsThrough found;
  std::map<std::string, bool> complete;
  for (const SummedField& field : kSummedFields) complete[field.line_key] = true;
  int64_t next = 1;  // the iteration whose line comes next
  int64_t number = 0;
  for (std::string text; next <= iteration && std::getline(in, text);) {
    ++number;
    if (text.empty()) continue;
    const std::string where = "line " + std::to_string(number);
    const nlohmann::json line = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    // Only the line being written when the run stopped can be torn: the one after N.
    check_input(line.is_object(),
                where + " is not a JSON object, before the line of iteration " +
                    std::to_string(next) + " that the checkpoint needs",
                metrics_path, hint);
    const std::string phase = line.value("phase", "");
    const auto at = line.find("iteration");
    const bool numbered = at != line.end() && at->is_number_integer();
    if (phase == "eval" && numbered && at->get<int64_t>() == 0) {
      const auto accuracy = line.find("eval_accuracy");
      if (accuracy != line.end() && accuracy->is_number())
        found.eval_before = accuracy->get<double>();
    }
    if (phase != "rl") continue;
    check_input(numbered && at->get<int64_t>() == next,
                where + " is the line of iteration " + (numbered ? at->dump() : "(none)") +
                    " where the line of iteration " + std::to_string(next) +
                    " should be (a line missing, repeated or edited)",
                metrics_path, hint);
    for (const SummedField& field : kSummedFields) {
      const auto value = line.find(field.line_key);
      if (value == line.end() || !value->is_number_integer()) {
        complete[field.line_key] = false;
      } else {
        found.sums[field.line_key] += value->get<int64_t>();
      }
    }
    const auto accuracy = line.find("eval_accuracy");
    if (accuracy != line.end() && accuracy->is_number()) found.eval_after = accuracy->get<double>();
    ++next;
  }
  check_input(next > iteration,
              "holds the lines of iterations 1.." + std::to_string(next - 1) + " only, but " +
                  checkpoint + " was written after iteration " + std::to_string(iteration),
              metrics_path, hint);
  for (const auto& [key, whole] : complete) {
    if (!whole) found.sums.erase(key);
  }
  return found;
}

}  // namespace

void check_checkpoint_against_run(int64_t iteration, const nlohmann::json& schedule_state,
                                  const std::string& state_path, const TrainConfig& config,
                                  int64_t train_examples, const std::string& metrics_path) {
  check_input(
      iteration <= config.train.iterations,
      "iteration " + std::to_string(iteration) +
          " is past the run's end, train.iterations=" + std::to_string(config.train.iterations),
      state_path,
      "resume with the train.iterations the run was started with (or more), or from "
      "another checkpoint");
  const nlohmann::json& engine = schedule_state.at("schedule");
  const int64_t saved_examples = engine.at("prompts").at("num_examples").get<int64_t>();
  check_input(saved_examples == train_examples,
              "schedule.schedule.prompts.num_examples is " + std::to_string(saved_examples) +
                  " but the run's training data has " + std::to_string(train_examples) +
                  " examples",
              state_path, "resume with the training data the run was started with");

  const std::string checkpoint = std::filesystem::path(state_path).parent_path().string();
  const MetricsThrough metrics = read_metrics_through(iteration, metrics_path, checkpoint);
  const std::string span =
      "the lines of iterations 1.." + std::to_string(iteration) + " in " + metrics_path;
  for (const SummedField& field : kSummedFields) {
    const auto sum = metrics.sums.find(field.line_key);
    if (sum == metrics.sums.end() || !engine.contains(field.state_key)) continue;
    const int64_t saved = engine.at(field.state_key).get<int64_t>();
    check_input(saved == sum->second,
                std::string("schedule.schedule.") + field.state_key + " is " +
                    std::to_string(saved) + " but " + span + " add up to " +
                    std::to_string(sum->second) + " (their " + field.line_key + ")",
                state_path, "state.json and metrics.jsonl are of different runs or were edited");
  }
  const nlohmann::json& evals = schedule_state.at("evals");
  if (metrics.eval_before) {
    check_input(evals.at("before").get<double>() == *metrics.eval_before,
                "evals.before is " + evals.at("before").dump() + " but " + metrics_path +
                    " records an accuracy of " + nlohmann::json(*metrics.eval_before).dump() +
                    " before RL",
                state_path, "state.json and metrics.jsonl are of different runs or were edited");
    const double after = metrics.eval_after.value_or(*metrics.eval_before);
    check_input(evals.at("after").get<double>() == after,
                "evals.after is " + evals.at("after").dump() + " but " + span +
                    " end with an accuracy of " + nlohmann::json(after).dump(),
                state_path, "state.json and metrics.jsonl are of different runs or were edited");
  }
}

}  // namespace aspen::pipeline
