// Disjoint train/eval splits for procedural tasks. A problem's split is a pure function of
// its canonical text (a salted 64-bit hash, bucketed by eval_fraction), not of the seed or
// the order of generation, so no eval problem can ever appear in a train split, whatever
// seeds or counts the two splits are generated with. collect_split() draws candidates from
// a seeded generator and keeps the distinct ones that hash to the requested split.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aspen/tasks/imports.h"
#include "aspen/tasks/seeded_rng.h"
#include "aspen/tasks/task_example.h"

namespace aspen::tasks {

// The split `canonical` belongs to: kEval for a fraction `eval_fraction` of all problems.
Split split_of(std::string_view canonical, double eval_fraction);

// Calls `draw` (which returns nullopt for a rejected candidate, e.g. a countdown tree with
// a non-integer value) until `count` examples with distinct ids in `split` are collected;
// the id is the canonical problem. Deterministic in (split, count, seed). Throws
// aspen::Error naming `task` when the problem space cannot supply `count` distinct
// examples within a bounded number of draws.
std::vector<TaskExample> collect_split(
    const std::string& task, Split split, int64_t count, uint64_t seed, double eval_fraction,
    const std::function<std::optional<TaskExample>(SplitMix64&)>& draw);

}  // namespace aspen::tasks
