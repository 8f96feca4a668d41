// The plan a tensor-parallel instance's leader sends its followers (instance_plan.h):
// every field survives the codec bit for bit, a malformed plan is an error naming the
// field, and a follower engine that applies the leader's plans - additions with their
// own seeds and stop strings, an abort mid-generation - finishes exactly the samples the
// leader's engine finishes, at the same steps, token for token (which the instance's
// collectives need: its replicas must schedule the same batches).
#include "aspen/pipeline/instance_plan.h"

#include <gtest/gtest.h>

#include <limits>

#include "agent_loop_driver.h"

namespace aspen::pipeline {
namespace instance_plan_test {

TEST(InstancePlan, EveryFieldDecodesToWhatWasEncoded) {
  InstancePlan plan;
  plan.step = true;
  plan.weights = PlannedWeights{7, false, {"a.weight", "b.bias"}, {{2, 3}, {5}}};
  GenerationRequest request;
  request.id = "3/12/1/t2";
  request.prompt = {1, 2, 151643};
  request.sample_indices = {1};
  request.params.temperature = 0.7;  // not exact in binary
  request.params.top_k = 20;
  request.params.top_p = 1.0 / 3.0;
  request.params.min_p = 0.05;
  request.params.seed = std::numeric_limits<uint64_t>::max();
  request.params.max_tokens = 9;
  request.params.min_tokens = 2;
  request.params.stop_token_ids = {151645};
  request.params.stop = {"\n\n", "</tool_call>"};
  request.params.ignore_eos = true;
  plan.requests.push_back(planned_addition(request));
  plan.requests.push_back(planned_abort("2/11/0/t1"));
  GenerationRequest unseeded;
  unseeded.id = "4/13";
  unseeded.prompt = {5};
  unseeded.n = 2;  // no sample indices: 0..n-1
  plan.requests.push_back(planned_addition(unseeded));

  const InstancePlan back =
      decode_instance_plan(nlohmann::json::parse(encode_instance_plan(plan).dump()));
  EXPECT_TRUE(back.step);
  EXPECT_FALSE(back.stop);
  ASSERT_TRUE(back.weights.has_value());
  EXPECT_EQ(back.weights->version, 7);
  EXPECT_FALSE(back.weights->own_shards);
  EXPECT_EQ(back.weights->names, plan.weights->names);
  EXPECT_EQ(back.weights->shapes, plan.weights->shapes);
  ASSERT_EQ(back.requests.size(), 3U);
  const GenerationRequest added = planned_generation_request(back.requests[0]);
  EXPECT_EQ(added.id, request.id);
  EXPECT_EQ(added.prompt, request.prompt);
  EXPECT_EQ(added.sample_indices, request.sample_indices);
  EXPECT_EQ(added.n, 1);
  const SamplingParams& p = added.params;
  EXPECT_EQ(p.temperature, 0.7);  // bit for bit, not near
  EXPECT_EQ(p.top_k, 20);
  EXPECT_EQ(p.top_p, 1.0 / 3.0);
  EXPECT_EQ(p.min_p, 0.05);
  EXPECT_EQ(p.seed, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(p.max_tokens, 9);
  EXPECT_EQ(p.min_tokens, 2);
  EXPECT_EQ(p.stop_token_ids, request.params.stop_token_ids);
  EXPECT_EQ(p.stop, request.params.stop);
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_TRUE(back.requests[1].abort);
  EXPECT_EQ(back.requests[1].id, "2/11/0/t1");
  const GenerationRequest second = planned_generation_request(back.requests[2]);
  EXPECT_EQ(second.sample_indices, std::vector<int64_t>({0, 1}));
  EXPECT_EQ(second.n, 2);
  EXPECT_FALSE(second.params.seed.has_value());

  // Colocated: only the version travels.
  InstancePlan own;
  own.stop = true;
  own.weights = PlannedWeights{3, true, {}, {}};
  const nlohmann::json json = encode_instance_plan(own);
  EXPECT_FALSE(json.at("weights").contains("names"));
  const InstancePlan own_back = decode_instance_plan(json);
  EXPECT_TRUE(own_back.stop);
  EXPECT_TRUE(own_back.weights->own_shards);
  EXPECT_EQ(own_back.weights->version, 3);
}

TEST(InstancePlan, AMalformedPlanIsAnErrorNamingTheField) {
  GenerationRequest request;
  request.id = "1/1";
  request.prompt = {1};
  InstancePlan plan;
  plan.requests.push_back(planned_addition(request));
  const nlohmann::json good = encode_instance_plan(plan);
  auto error_of = [](const nlohmann::json& json) -> std::string {
    try {
      decode_instance_plan(json);
    } catch (const Error& e) {
      return e.what();
    }
    return "accepted";
  };
  nlohmann::json bad = good;
  bad["requests"][0]["params"]["temperature"] = "hot";
  EXPECT_NE(error_of(bad).find("request 0: params"), std::string::npos) << error_of(bad);
  EXPECT_NE(error_of(bad).find("temperature"), std::string::npos) << error_of(bad);
  bad = good;
  bad["requests"][0].erase("prompt");
  EXPECT_NE(error_of(bad).find("\"prompt\""), std::string::npos) << error_of(bad);
  bad = good;
  bad.erase("step");
  EXPECT_NE(error_of(bad).find("\"step\""), std::string::npos) << error_of(bad);
  bad = good;
  bad["weights"] = {
      {"version", 1}, {"own_shards", false}, {"names", {"a"}}, {"shapes", nlohmann::json::array()}};
  EXPECT_NE(error_of(bad).find("1 names but 0 shapes"), std::string::npos) << error_of(bad);
}

// The leader's loop in miniature: requests of their own seeds and stop strings added
// between steps, one aborted mid-generation; each step's plan goes through the codec
// (as text, as broadcast_json sends it) to a follower engine of the same weights.
TEST(InstancePlan, AFollowerApplyingTheLeadersPlansFinishesWhatTheLeaderFinishes) {
  auto leader = agent_loop_testing::tiny_engine();
  auto follower = agent_loop_testing::tiny_engine();
  std::vector<PlannedRequest> pending;
  auto add = [&](const std::string& id, std::vector<TokenId> prompt, uint64_t seed,
                 std::vector<std::string> stop) {
    GenerationRequest request;
    request.id = id;
    request.prompt = std::move(prompt);
    request.n = 2;
    request.params.temperature = 1.0;
    request.params.seed = seed;
    request.params.max_tokens = 24;
    request.params.stop = std::move(stop);
    pending.push_back(planned_addition(request));
    leader->add_request(std::move(request));
  };
  int64_t stopped_by_string = 0, finished = 0;
  for (int64_t step = 0; step < 200 && (step < 6 || leader->has_unfinished()); ++step) {
    if (step == 0) add("a", {9707, 11, 1879}, 11, {"e"});
    if (step == 2) add("b", {785, 3974, 13876}, 12, {"a", "o"});
    if (step == 3) add("c", {40, 1079, 264}, 13, {});
    if (step == 5 && leader->abort_request("c")) pending.push_back(planned_abort("c"));
    InstancePlan plan;
    plan.step = true;
    plan.requests = std::move(pending);
    pending.clear();
    const InstancePlan sent =
        decode_instance_plan(nlohmann::json::parse(encode_instance_plan(plan).dump()));
    for (const PlannedRequest& planned : sent.requests) {
      if (planned.abort) {
        follower->abort_request(planned.id);
      } else {
        follower->add_request(planned_generation_request(planned));
      }
    }
    const std::vector<Completion> ours = leader->step();
    const std::vector<Completion> theirs = follower->step();
    ASSERT_EQ(ours.size(), theirs.size()) << "step " << step;
    for (size_t i = 0; i < ours.size(); ++i) {
      EXPECT_EQ(ours[i].request_id, theirs[i].request_id) << "step " << step;
      EXPECT_EQ(ours[i].sample_index, theirs[i].sample_index) << "step " << step;
      EXPECT_EQ(ours[i].token_ids, theirs[i].token_ids) << "step " << step;
      EXPECT_EQ(ours[i].finish_reason, theirs[i].finish_reason) << "step " << step;
      stopped_by_string += ours[i].finish_reason == FinishReason::kStop &&
                           static_cast<int64_t>(ours[i].token_ids.size()) < 24;
      ++finished;
    }
  }
  EXPECT_FALSE(follower->has_unfinished());
  EXPECT_EQ(finished, 4) << "a and b, two samples each; c was aborted";
  EXPECT_GE(stopped_by_string, 1) << "the stop strings ended some sample early";
}

}  // namespace instance_plan_test
}  // namespace aspen::pipeline
