#include "aspen/tasks/split_assignment.h"

#include <unordered_set>

#include "aspen/tasks/imports.h"
#include "aspen/util/error.h"

namespace aspen::tasks {
namespace {

// FNV-1a, then a SplitMix64 finaliser so nearby problems ("1+2", "1+3") spread evenly.
uint64_t hash_problem(std::string_view text) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001B3ull;
  }
  return SplitMix64(h).next();
}

}  // namespace

Split split_of(std::string_view canonical, double eval_fraction) {
  constexpr uint64_t kBuckets = 1'000'000;
  uint64_t bucket = hash_problem(canonical) % kBuckets;
  return static_cast<double>(bucket) < eval_fraction * kBuckets ? Split::kEval : Split::kTrain;
}

std::vector<TaskExample> collect_split(
    const std::string& task, Split split, int64_t count, uint64_t seed, double eval_fraction,
    const std::function<std::optional<TaskExample>(SplitMix64&)>& draw) {
  check_input(count >= 0, "example count must be >= 0, got " + std::to_string(count),
              "task " + task);
  // Different streams for the two splits, so a train set does not waste its draws on the
  // same sequence the eval set accepted.
  SplitMix64 rng(seed ^ (split == Split::kEval ? 0xE7A1E7A1E7A1E7A1ull : 0));
  std::vector<TaskExample> out;
  std::unordered_set<std::string> seen;
  const int64_t max_draws = 10'000 + 200 * count;
  for (int64_t draws = 0; static_cast<int64_t>(out.size()) < count; ++draws) {
    if (draws >= max_draws) {
      throw Error("found only " + std::to_string(out.size()) + " distinct " + split_name(split) +
                      " examples of " + std::to_string(count) + " after " +
                      std::to_string(max_draws) + " draws",
                  "task " + task,
                  "the problem space is too small: widen its ranges or ask for fewer examples");
    }
    std::optional<TaskExample> example = draw(rng);
    if (!example || split_of(example->id, eval_fraction) != split) continue;
    if (seen.insert(example->id).second) out.push_back(std::move(*example));
  }
  return out;
}

}  // namespace aspen::tasks
