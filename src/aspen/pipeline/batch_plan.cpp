#include "aspen/pipeline/batch_plan.h"

#include "aspen/dock/wire_format.h"

namespace aspen {
namespace {

void put_set(ByteWriter& w, const std::set<int64_t>& values) {
  w.put_vector(std::vector<int64_t>(values.begin(), values.end()));
}

std::set<int64_t> get_set(ByteReader& r) {
  const std::vector<int64_t> values = r.get_vector<int64_t>();
  return {values.begin(), values.end()};
}

}  // namespace

std::string encode_batch_plan(const BatchPlan& plan) {
  ByteWriter w;
  w.put_vector(plan.groups);
  w.put_vector(plan.trained_versions);
  w.put<int64_t>(plan.sampling_rounds);
  w.put_vector(plan.rewards.scores);
  w.put_vector(plan.rewards.lengths);
  w.put_vector(plan.rewards.versions);
  w.put_vector(plan.rewards.row_groups);
  put_set(w, plan.rewards.groups);
  put_set(w, plan.rewards.informative);
  return w.take();
}

BatchPlan decode_batch_plan(const std::string& bytes) {
  ByteReader r(bytes);
  BatchPlan plan;
  plan.groups = r.get_vector<int64_t>();
  plan.trained_versions = r.get_vector<int64_t>();
  plan.sampling_rounds = r.get<int64_t>();
  plan.rewards.scores = r.get_vector<double>();
  plan.rewards.lengths = r.get_vector<int64_t>();
  plan.rewards.versions = r.get_vector<int64_t>();
  plan.rewards.row_groups = r.get_vector<int64_t>();
  plan.rewards.groups = get_set(r);
  plan.rewards.informative = get_set(r);
  r.expect_end();
  return plan;
}

}  // namespace aspen
