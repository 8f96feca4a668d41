// PromptSource: the order in which training prompts are drawn, as prompt groups.
//
// Examples are visited epoch by epoch, each epoch a fresh shuffle (std::mt19937_64
// seeded once per run); every drawn prompt becomes a group with the next group id
// (0, 1, 2, ...), which also names its rollout request and seeds its sampling. The
// whole state (RNG, epoch order, cursor, next id, open groups) round-trips through
// state()/restore(), so a resumed run draws exactly the prompts an uninterrupted
// run would have drawn.
// Thread safety: not synchronised; one owner thread.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "aspen/pipeline/imports.h"

namespace aspen::pipeline {

struct PromptGroup {
  int64_t group_id = 0;
  int64_t example = 0;  // index into the train examples
};

class PromptSource {
 public:
  // Throws aspen::Error when there are no examples.
  PromptSource(int64_t num_examples, uint64_t seed);

  // The next `count` prompts, each opened as a group.
  std::vector<PromptGroup> next(int64_t count);
  // The example a still-open group was drawn from; aspen::Error for an unknown group.
  int64_t example_of(int64_t group_id) const;
  // Closes a group once all of its rows are consumed (keeps the map small).
  void close(int64_t group_id) { open_.erase(group_id); }
  int64_t groups_drawn() const { return next_group_; }
  // Every open group (drawn, not yet closed), by group id.
  std::vector<PromptGroup> open_groups() const {
    std::vector<PromptGroup> groups;
    for (const auto& [id, example] : open_) groups.push_back({id, example});
    return groups;
  }

  nlohmann::json state() const;
  // aspen::Error when `state` is malformed or was saved for a different dataset size.
  void restore(const nlohmann::json& state);
  // Checks a saved state on its own: {"num_examples" >= 1, "rng": the text form of an
  // std::mt19937_64, "order": empty or a permutation of [0, num_examples), "cursor" <=
  // order's size, "next_group" >= 0, "open": [[group_id < next_group, example in
  // range], ...] with distinct group ids}. aspen::Error naming `source` and the field.
  static void check_state(const nlohmann::json& state, const std::string& source);

 private:
  int64_t num_examples_;
  std::mt19937_64 rng_;
  std::vector<int64_t> order_;  // the current epoch's shuffled example indices
  size_t cursor_ = 0;
  int64_t next_group_ = 0;
  std::map<int64_t, int64_t> open_;  // group id -> example
};

}  // namespace aspen::pipeline
