#include "aspen/reward/verifier_registry.h"

#include "aspen/reward/command_reward.h"
#include "aspen/reward/countdown_verifier.h"
#include "aspen/reward/format_verifier.h"
#include "aspen/reward/http_reward.h"
#include "aspen/reward/math_verifier.h"
#include "aspen/reward/weighted_reward.h"
#include "aspen/util/error.h"

namespace aspen {

std::vector<std::string> verifier_kinds() {
  return {"command", "countdown", "format", "http", "math", "weighted"};
}

std::unique_ptr<Verifier> make_verifier(const std::string& kind, const nlohmann::json& options) {
  if (kind == "math")
    return std::make_unique<MathVerifier>(MathVerifierOptions::from_json(options));
  if (kind == "format") return std::make_unique<FormatVerifier>(options);
  if (kind == "countdown") return std::make_unique<CountdownVerifier>(options);
  // A user's reward script as a child process (command_reward.h).
  if (kind == "command") {
    return std::make_unique<CommandReward>(CommandRewardOptions::from_json(options));
  }
  // A reward service over HTTP (http_reward.h).
  if (kind == "http") return std::make_unique<HttpReward>(HttpRewardOptions::from_json(options));
  // A weighted sum of verifiers: `options` is its list of components (weighted_reward.h).
  if (kind == "weighted") {
    return std::make_unique<WeightedReward>(WeightedReward::from_json(options, "verifier_options"));
  }
  std::string known;
  for (const std::string& name : verifier_kinds()) known += (known.empty() ? "" : ", ") + name;
  throw Error("unknown verifier \"" + kind + "\"", "verifier", "known verifiers: " + known);
}

}  // namespace aspen
