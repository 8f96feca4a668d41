#include "aspen/pipeline/instance_plan.h"

#include <c10/util/Exception.h>

#include "aspen/pipeline/imports.h"
#include "aspen/util/error.h"

namespace aspen::pipeline {
namespace {

// Doubles travel as JSON numbers: nlohmann writes the shortest text that reads back to
// the same double, so a follower samples with bit-identical parameters.
nlohmann::json encode_sampling(const SamplingParams& p) {
  nlohmann::json json = {{"temperature", p.temperature},
                         {"top_k", p.top_k},
                         {"top_p", p.top_p},
                         {"min_p", p.min_p},
                         {"max_tokens", p.max_tokens},
                         {"min_tokens", p.min_tokens},
                         {"stop_token_ids", p.stop_token_ids},
                         {"stop", p.stop},
                         {"ignore_eos", p.ignore_eos}};
  if (p.seed) json["seed"] = *p.seed;
  return json;
}

template <typename T>
T field(const nlohmann::json& json, const char* name, const std::string& where) {
  check_input(json.is_object() && json.contains(name),
              std::string("missing field \"") + name + "\"", where);
  try {
    return json.at(name).get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("field \"") + name + "\": " + e.what(), where);
  }
}

SamplingParams decode_sampling(const nlohmann::json& json, const std::string& where) {
  SamplingParams p;
  p.temperature = field<double>(json, "temperature", where);
  p.top_k = field<int64_t>(json, "top_k", where);
  p.top_p = field<double>(json, "top_p", where);
  p.min_p = field<double>(json, "min_p", where);
  p.max_tokens = field<int64_t>(json, "max_tokens", where);
  p.min_tokens = field<int64_t>(json, "min_tokens", where);
  p.stop_token_ids = field<std::vector<TokenId>>(json, "stop_token_ids", where);
  p.stop = field<std::vector<std::string>>(json, "stop", where);
  p.ignore_eos = field<bool>(json, "ignore_eos", where);
  if (json.contains("seed")) p.seed = field<uint64_t>(json, "seed", where);
  return p;
}

}  // namespace

PlannedRequest planned_addition(const GenerationRequest& request) {
  // Partial rollouts refuse tensor-parallel instances (config/train_config.cpp): a
  // resumed request's prefix is not planned.
  TORCH_CHECK(request.resume_from.empty(), "a resumed request cannot be planned: ", request.id);
  PlannedRequest planned;
  planned.id = request.id;
  planned.prompt = request.prompt;
  planned.samples = request.sample_indices;
  if (planned.samples.empty()) {
    for (int64_t s = 0; s < request.n; ++s) planned.samples.push_back(s);
  }
  planned.params = request.params;
  return planned;
}

PlannedRequest planned_abort(const std::string& id) {
  PlannedRequest planned;
  planned.abort = true;
  planned.id = id;
  return planned;
}

GenerationRequest planned_generation_request(const PlannedRequest& planned) {
  GenerationRequest request;
  request.id = planned.id;
  request.prompt = planned.prompt;
  request.sample_indices = planned.samples;
  request.n = static_cast<int64_t>(planned.samples.size());
  request.params = planned.params;
  return request;
}

nlohmann::json encode_instance_plan(const InstancePlan& plan) {
  nlohmann::json requests = nlohmann::json::array();
  for (const PlannedRequest& r : plan.requests) {
    if (r.abort) {
      requests.push_back({{"abort", r.id}});
      continue;
    }
    requests.push_back({{"id", r.id},
                        {"prompt", r.prompt},
                        {"samples", r.samples},
                        {"params", encode_sampling(r.params)}});
  }
  nlohmann::json json = {{"step", plan.step}, {"stop", plan.stop}, {"requests", requests}};
  if (plan.weights) {
    const PlannedWeights& w = *plan.weights;
    json["weights"] = {{"version", w.version}, {"own_shards", w.own_shards}};
    if (!w.own_shards) {
      json["weights"]["names"] = w.names;
      json["weights"]["shapes"] = w.shapes;
    }
  }
  return json;
}

InstancePlan decode_instance_plan(const nlohmann::json& json) {
  const std::string where = "tensor-parallel instance plan";
  InstancePlan plan;
  plan.step = field<bool>(json, "step", where);
  plan.stop = field<bool>(json, "stop", where);
  if (json.contains("weights")) {
    const nlohmann::json& w = json.at("weights");
    PlannedWeights weights;
    weights.version = field<int64_t>(w, "version", where + ": weights");
    weights.own_shards = field<bool>(w, "own_shards", where + ": weights");
    if (!weights.own_shards) {
      weights.names = field<std::vector<std::string>>(w, "names", where + ": weights");
      weights.shapes = field<std::vector<std::vector<int64_t>>>(w, "shapes", where + ": weights");
      check_input(weights.names.size() == weights.shapes.size(),
                  std::to_string(weights.names.size()) + " names but " +
                      std::to_string(weights.shapes.size()) + " shapes",
                  where + ": weights");
    }
    plan.weights = std::move(weights);
  }
  const nlohmann::json& requests = field<nlohmann::json>(json, "requests", where);
  check_input(requests.is_array(), "\"requests\" is not an array", where);
  for (size_t i = 0; i < requests.size(); ++i) {
    const nlohmann::json& r = requests[i];
    const std::string at = where + ": request " + std::to_string(i);
    if (r.is_object() && r.contains("abort")) {
      plan.requests.push_back(planned_abort(field<std::string>(r, "abort", at)));
      continue;
    }
    PlannedRequest planned;
    planned.id = field<std::string>(r, "id", at);
    planned.prompt = field<std::vector<TokenId>>(r, "prompt", at);
    planned.samples = field<std::vector<int64_t>>(r, "samples", at);
    planned.params = decode_sampling(field<nlohmann::json>(r, "params", at), at + ": params");
    plan.requests.push_back(std::move(planned));
  }
  return plan;
}

}  // namespace aspen::pipeline
