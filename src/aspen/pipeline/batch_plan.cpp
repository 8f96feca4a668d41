#include "aspen/pipeline/batch_plan.h"

#include <algorithm>

#include "aspen/dock/claim_codec.h"
#include "aspen/dock/wire_format.h"
#include "aspen/pipeline/imports.h"

namespace aspen::pipeline {
namespace {

void put_set(ByteWriter& w, const std::set<int64_t>& values) {
  w.put_vector(std::vector<int64_t>(values.begin(), values.end()));
}

std::set<int64_t> get_set(ByteReader& r) {
  const std::vector<int64_t> values = r.get_vector<int64_t>();
  return {values.begin(), values.end()};
}

}  // namespace

std::vector<int64_t> BatchPlan::groups() const { return groups_of(trained); }

std::vector<int64_t> groups_of(const TrainerRows& rows) {
  std::vector<int64_t> out;
  for (const ClaimedRow& row : rows.rows.rows) {
    if (std::find(out.begin(), out.end(), row.info.group_id) == out.end()) {
      out.push_back(row.info.group_id);
    }
  }
  return out;
}

std::vector<int64_t> BatchPlan::versions() const {
  std::vector<int64_t> out;
  for (const ClaimedRow& row : trained.rows.rows) out.push_back(row.info.version);
  return out;
}

std::string encode_batch_plan(const BatchPlan& plan) {
  ByteWriter w;
  w.put_string(encode_claim(plan.trained.rows));
  w.put_vector(plan.trained.scores);
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
  plan.trained.rows = decode_claim(r.get_string());
  plan.trained.scores = r.get_vector<double>();
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

}  // namespace aspen::pipeline
