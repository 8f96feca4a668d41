// make_verifier: builds a verifier from its kind name and JSON options, so configs and
// datasets can name verifiers ("math", "format", "countdown") instead of code.
// Throws aspen::Error for an unknown kind (listing the known ones) or bad options.
// Thread safety: a free function with no shared state.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aspen/reward/verifier.h"

namespace aspen {

std::unique_ptr<Verifier> make_verifier(const std::string& kind,
                                        const nlohmann::json& options = nlohmann::json::object());

// The kinds make_verifier accepts, for help text and errors.
std::vector<std::string> verifier_kinds();

}  // namespace aspen
