#include "aspen/reward/verifier_registry.h"

#include <algorithm>
#include <map>

#include "aspen/reward/command_reward.h"
#include "aspen/reward/countdown_verifier.h"
#include "aspen/reward/format_verifier.h"
#include "aspen/reward/http_reward.h"
#include "aspen/reward/imports.h"
#include "aspen/reward/math_verifier.h"
#include "aspen/reward/weighted_reward.h"
#include "aspen/util/error.h"
#include "aspen/util/mutex.h"

namespace aspen::reward {
namespace {

struct RegisteredKinds {
  Mutex mutex;
  std::map<std::string, VerifierFactory> factories GUARDED_BY(mutex);
};

RegisteredKinds& registered_kinds() {
  static RegisteredKinds kinds;
  return kinds;
}

}  // namespace

void register_verifier_kind(const std::string& kind, VerifierFactory factory) {
  RegisteredKinds& kinds = registered_kinds();
  MutexLock lock(kinds.mutex);
  kinds.factories[kind] = std::move(factory);
}

std::vector<std::string> verifier_kinds() {
  std::vector<std::string> kinds = {"command", "countdown", "format", "http", "math", "weighted"};
  RegisteredKinds& registered = registered_kinds();
  MutexLock lock(registered.mutex);
  for (const auto& [kind, factory] : registered.factories) kinds.push_back(kind);
  std::sort(kinds.begin(), kinds.end());
  return kinds;
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
  VerifierFactory factory;
  {
    RegisteredKinds& registered = registered_kinds();
    MutexLock lock(registered.mutex);
    auto it = registered.factories.find(kind);
    if (it != registered.factories.end()) factory = it->second;
  }
  if (factory) return factory(options);
  std::string known;
  for (const std::string& name : verifier_kinds()) known += (known.empty() ? "" : ", ") + name;
  throw Error("unknown verifier \"" + kind + "\"", "verifier", "known verifiers: " + known);
}

}  // namespace aspen::reward
