// What the leader of a tensor-parallel rollout instance tells its followers before each
// engine step (rollout_worker.h, "Tensor-parallel instances"), and its codec. The
// followers apply it in order and so schedule exactly the batches the leader does: the
// instance's collectives pair only if every replica adds and removes the same requests,
// with the same sampling, between the same steps.
//
// A plan carries every request the leader added or aborted since the last one, in the
// leader's order, each added request with the SamplingParams the leader gave its engine
// (an agent's call chooses its own seed and stop strings, so a follower cannot derive
// them from the group); the weights to load first, if new; and whether to step or stop.
// Weight tensors do not travel in the plan: they follow it as broadcasts, in `names`
// order, or, colocated, each peer takes `version` of its own resharded shards.
// Thread safety: pure functions. Errors: aspen::Error naming the field of a malformed
// plan.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "aspen/pipeline/imports.h"
#include "aspen/rollout/engine.h"

namespace aspen::pipeline {

// One change to the engine's requests.
struct PlannedRequest {
  bool abort = false;  // true: abort `id`; the other fields are unused
  std::string id;
  std::vector<TokenId> prompt;
  std::vector<int64_t> samples;  // GenerationRequest::sample_indices
  SamplingParams params;
};

struct PlannedWeights {
  int64_t version = 0;
  bool own_shards = false;  // each peer takes its own resharded shards of `version`
  // Otherwise the tensors broadcast after the plan, in this order, fp32.
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
};

struct InstancePlan {
  bool step = false;                      // run one engine step after applying it
  bool stop = false;                      // the leader leaves: the follower returns
  std::optional<PlannedWeights> weights;  // loaded before the requests are applied
  std::vector<PlannedRequest> requests;
};

// The plan entry of `request` as the leader adds it (a copy: the leader then moves the
// request into its engine).
PlannedRequest planned_addition(const GenerationRequest& request);
PlannedRequest planned_abort(const std::string& id);
// The request a follower adds for an addition.
GenerationRequest planned_generation_request(const PlannedRequest& planned);

nlohmann::json encode_instance_plan(const InstancePlan& plan);
InstancePlan decode_instance_plan(const nlohmann::json& json);

}  // namespace aspen::pipeline
