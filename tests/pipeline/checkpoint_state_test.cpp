// A checkpoint's state.json is checked in full when read (pipeline/checkpoint_state.h):
// a corrupt or hand-edited state is refused naming the field, before any of it reaches
// an index (the prompt order indexes the training examples).
#include "aspen/pipeline/checkpoint_state.h"

#include <gtest/gtest.h>

#include "aspen/pipeline/prompt_source.h"
#include "aspen/util/error.h"
#include "checkpoint_state_fixture.h"

namespace aspen::pipeline {
namespace {

nlohmann::json valid_state() {
  return {{"iteration", 2}, {"schedule", testing::example_schedule_state()}};
}

std::string refusal(const nlohmann::json& state) {
  try {
    read_checkpoint_state(state.dump(), "run/state.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CheckpointState, ReadsWhatTheEngineWrites) {
  const CheckpointState state = read_checkpoint_state(valid_state().dump(), "state.json");
  EXPECT_EQ(state.iteration, 2);
  EXPECT_EQ(state.schedule, valid_state()["schedule"]);
}

TEST(CheckpointState, RefusesTheFormBeforeTheEngineSayingSo) {
  nlohmann::json state = valid_state();
  nlohmann::json& engine = state["schedule"]["schedule"];
  engine.erase("consumed_groups");
  engine.erase("refilled_groups");
  engine["trained_groups"] = 1;
  const std::string what = refusal(state);
  EXPECT_NE(what.find("before the iteration engine"), std::string::npos) << what;
  engine.erase("trained_groups");
  EXPECT_NE(refusal(state).find("consumed_groups"), std::string::npos) << refusal(state);
}

TEST(CheckpointState, RefusesAPromptOrderThatIsNotAPermutation) {
  // Before this check, an order entry past the dataset indexed past the examples.
  nlohmann::json state = valid_state();
  state["schedule"]["schedule"]["prompts"]["order"] = {0, 1, 2, 999999};
  const std::string what = refusal(state);
  EXPECT_NE(what.find("run/state.json"), std::string::npos) << what;
  EXPECT_NE(what.find("order is not a permutation"), std::string::npos) << what;
  state["schedule"]["schedule"]["prompts"]["order"] = {0, 1, 1, 2};
  EXPECT_NE(refusal(state).find("order is not a permutation"), std::string::npos);
}

TEST(CheckpointState, RefusesACursorPastTheOrder) {
  nlohmann::json state = valid_state();
  state["schedule"]["schedule"]["prompts"]["cursor"] = 5;
  EXPECT_NE(refusal(state).find("cursor must be an integer in [0, 4]"), std::string::npos);
}

TEST(CheckpointState, RefusesPendingGroupsThatAreNotOpen) {
  nlohmann::json state = valid_state();
  state["schedule"]["schedule"]["pending"] = {{0, 1}};  // group 0 was closed
  EXPECT_NE(refusal(state).find("is not an open prompt group"), std::string::npos);
}

TEST(CheckpointState, NamesAMissingOrMistypedField) {
  nlohmann::json state = valid_state();
  state["schedule"]["schedule"].erase("version");
  EXPECT_NE(refusal(state).find("schedule.schedule has no \"version\""), std::string::npos);
  state = valid_state();
  state["schedule"]["schedule"]["samples"] = "many";
  EXPECT_NE(refusal(state).find("schedule.schedule.samples must be an integer >= 0"),
            std::string::npos);
  state = valid_state();
  state["schedule"]["evals"]["after"] = 1.5;
  EXPECT_NE(refusal(state).find("schedule.evals.after must be a number in [0"),
            std::string::npos);
  state = valid_state();
  state["iteration"] = 0;
  EXPECT_NE(refusal(state).find("state.iteration must be an integer >= 1"), std::string::npos);
  EXPECT_NE(refusal(nlohmann::json::array()).find("state is not an object"), std::string::npos);
}

TEST(CheckpointState, RefusesAPolicyVersionThatIsNotTheIteration) {
  // An iteration edited on its own (the policy trained 2 times, the state says 3) once
  // resumed with the wrong rollout window.
  nlohmann::json state = valid_state();
  state["iteration"] = 3;
  const std::string what = refusal(state);
  EXPECT_NE(what.find("run/state.json: schedule.schedule.version is 2 but iteration is 3"),
            std::string::npos)
      << what;
}

TEST(CheckpointState, RefusesAnIterationOtherThanItsDirectorys) {
  // "iteration": 3 in the checkpoint of iteration 2 once failed deep in the resume with
  // a message that named no file.
  nlohmann::json state = valid_state();
  state["iteration"] = 3;
  state["schedule"]["schedule"]["version"] = 3;
  try {
    read_checkpoint_state(state.dump(), "run/iter_000002/state.json", 2);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("run/iter_000002/state.json: iteration is 3 but its "
                                         "directory is the checkpoint of iteration 2"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(read_checkpoint_state(valid_state().dump(), "iter_000002/state.json", 2));
}

TEST(CheckpointState, RefusesAnUnreadableRngState) {
  nlohmann::json state = valid_state();
  state["schedule"]["schedule"]["prompts"]["rng"] = "not numbers";
  EXPECT_NE(refusal(state).find("unreadable RNG state"), std::string::npos);
}

TEST(CheckpointState, RefusesDeeplyNestedJson) {
  const std::string nested(1000, '[');
  EXPECT_THROW(read_checkpoint_state(nested, "state.json"), Error);
}

}  // namespace
}  // namespace aspen::pipeline
