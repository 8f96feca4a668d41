// WeightedReward: the reward of a row as a weighted sum of named verifiers, e.g.
// 1.0 * math accuracy + 0.1 * format. Keeps every component's raw score so training can
// log accuracy separately from the shaped total.
//
// Config form (from_json): an array of
//   {"name": "acc", "verifier": "math", "weight": 1.0, "options": {...}}
// where name defaults to the verifier kind and must be unique, weight defaults to 1.0 and
// must be finite, options go to make_verifier. Errors name "<source>[i].<key>".
// Thread safety: immutable after construction; evaluate()/score() may run concurrently
// (components are const verifiers, themselves thread-safe).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "aspen/reward/imports.h"
#include "aspen/reward/verifier.h"

namespace aspen::reward {

struct RewardComponent {
  std::string name;
  double weight = 1.0;
  std::shared_ptr<const Verifier> verifier;
};

struct RewardBreakdown {
  double total = 0.0;
  // (component name, unweighted score), in construction order.
  std::vector<std::pair<std::string, double>> components;
};

class WeightedReward : public Verifier {
 public:
  // Throws aspen::Error for no components, a null verifier, a duplicate name or a
  // non-finite weight.
  explicit WeightedReward(std::vector<RewardComponent> components);
  static WeightedReward from_json(const nlohmann::json& spec, const std::string& source = "reward");

  std::string name() const override { return "weighted"; }
  double score(const RewardInput& input) const override { return evaluate(input).total; }
  // Each component scores the whole batch (one call per external reward).
  std::vector<double> score_batch(const std::vector<RewardInput>& inputs) const override;
  RewardBreakdown evaluate(const RewardInput& input) const;

  const std::vector<RewardComponent>& components() const { return components_; }

 private:
  std::vector<RewardComponent> components_;
};

}  // namespace aspen::reward
