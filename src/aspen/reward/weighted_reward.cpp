#include "aspen/reward/weighted_reward.h"

#include <cmath>
#include <set>

#include "aspen/reward/imports.h"
#include "aspen/reward/json_options.h"
#include "aspen/reward/verifier_registry.h"
#include "aspen/util/error.h"

namespace aspen::reward {

WeightedReward::WeightedReward(std::vector<RewardComponent> components)
    : components_(std::move(components)) {
  check_input(!components_.empty(), "a weighted reward needs at least one verifier", "reward");
  std::set<std::string> names;
  for (const RewardComponent& c : components_) {
    check_input(c.verifier != nullptr, "component \"" + c.name + "\" has no verifier", "reward");
    check_input(std::isfinite(c.weight), "component \"" + c.name + "\" has a non-finite weight",
                "reward");
    // As scores (verifier.h): weight times score must stay far from overflow when averaged.
    check_input(std::fabs(c.weight) <= kMaxRewardMagnitude,
                "component \"" + c.name + "\" has weight " + std::to_string(c.weight) +
                    ", outside [-1e6, 1e6]",
                "reward");
    check_input(names.insert(c.name).second, "duplicate component name \"" + c.name + "\"",
                "reward", "give each component a distinct \"name\"");
  }
}

WeightedReward WeightedReward::from_json(const nlohmann::json& spec, const std::string& source) {
  check_input(spec.is_array(),
              "expected an array of {verifier, weight, ...}, got " + json_for_message(spec),
              source);
  std::vector<RewardComponent> components;
  for (size_t i = 0; i < spec.size(); ++i) {
    JsonOptions reader(spec[i], source + "[" + std::to_string(i) + "]");
    std::string kind = reader.string("verifier", "");
    check_input(!kind.empty(), "missing \"verifier\"", reader.path("verifier"));
    RewardComponent component;
    component.name = reader.string("name", kind);
    component.weight = reader.number("weight", 1.0);
    const nlohmann::json* options = reader.raw("options");
    reader.check_no_unknown_keys();
    try {
      component.verifier = make_verifier(kind, options ? *options : nlohmann::json::object());
    } catch (const Error& e) {
      // Say which entry of the reward list the verifier error belongs to.
      throw Error(e.problem(), reader.path("options") + ": " + e.input(), e.hint());
    }
    components.push_back(std::move(component));
  }
  return WeightedReward(std::move(components));
}

std::vector<double> WeightedReward::score_batch(const std::vector<RewardInput>& inputs) const {
  std::vector<double> totals(inputs.size(), 0.0);
  for (const RewardComponent& component : components_) {
    const std::vector<double> scores = component.verifier->score_batch(inputs);
    for (size_t i = 0; i < inputs.size(); ++i) totals[i] += component.weight * scores[i];
  }
  return totals;
}

RewardBreakdown WeightedReward::evaluate(const RewardInput& input) const {
  RewardBreakdown out;
  out.components.reserve(components_.size());
  for (const RewardComponent& c : components_) {
    double s = c.verifier->score(input);
    out.total += c.weight * s;
    out.components.emplace_back(c.name, s);
  }
  return out;
}

}  // namespace aspen::reward
