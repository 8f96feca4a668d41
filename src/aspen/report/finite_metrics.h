// check_finite_metrics: JSON has no NaN or infinity (nlohmann writes them as null), so
// a metric that is not a finite number would reach metrics.jsonl or summary.json as
// null, read back by every consumer as "missing". It is an error instead, naming the
// key and where, and nothing is written.
// Thread safety: a pure function.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "aspen/report/imports.h"

namespace aspen::report {

// aspen::Error naming `where` and the key path ("bubbles.skewness") of the first number
// in `metrics` that is NaN or infinite.
void check_finite_metrics(const nlohmann::json& metrics, const std::string& where);

}  // namespace aspen::report
