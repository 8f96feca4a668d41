// make_verifier: builds a verifier from its kind name and JSON options, so configs and
// datasets can name verifiers ("math", "format", "countdown") instead of code.
// Throws aspen::Error for an unknown kind (listing the known ones) or bad options.
//
// Kinds that need modules this one does not link (the reward model, "model", needs
// torch and the model module: pipeline/reward_model_verifier.h) are added at run time
// with register_verifier_kind; they then work everywhere a kind name does (weighted
// components included).
// Thread safety: make_verifier and verifier_kinds may run concurrently with each other
// and with register_verifier_kind (a mutex guards the registered kinds).
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aspen/reward/imports.h"
#include "aspen/reward/verifier.h"

namespace aspen::reward {

std::unique_ptr<Verifier> make_verifier(const std::string& kind,
                                        const nlohmann::json& options = nlohmann::json::object());

using VerifierFactory =
    std::function<std::unique_ptr<Verifier>(const nlohmann::json& options)>;
// Adds (or replaces) a kind make_verifier builds with `factory`.
void register_verifier_kind(const std::string& kind, VerifierFactory factory);

// The kinds make_verifier accepts, for help text and errors.
std::vector<std::string> verifier_kinds();

}  // namespace aspen::reward
