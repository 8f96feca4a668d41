// TensorParallel: where this process sits in a Megatron-style tensor-parallel (TP)
// group - the group's size, this rank's index in it, and the process group the TP
// collectives run over.
//
// size 1 (the default) means no tensor parallelism: there is no group, and every TP
// layer and collective (tp_collectives.h) is the identity, so a model built with the
// default context computes exactly what a model without TP support would.
// size > 1 requires a group of exactly `size` ranks whose rank() is `rank`.
//
// The context is a value: every TP layer keeps its own copy (the group handle is a
// shared, cheap-to-copy reference), so layers take it as a constructor argument
// instead of reaching for a global.
// Thread safety: immutable after construction; the collectives issued through the
// group follow ProcessGroupHandle's rule (same order on every rank, one thread).
// Errors: over() and validate() throw aspen::Error for an inconsistent context.
#pragma once

#include <optional>
#include <string>

#include "aspen/parallel/imports.h"
#include "aspen/parallel/process_group.h"

namespace aspen::parallel {

struct TensorParallel {
  int size = 1;
  int rank = 0;
  std::optional<ProcessGroupHandle> group;  // engaged iff size > 1

  // The TP context spanning every rank of `group` (size = group.world_size()).
  // A group of one rank gives the no-TP context (no collectives will be issued).
  static TensorParallel over(const ProcessGroupHandle& group);

  bool enabled() const { return size > 1; }

  // aspen::Error naming `what` unless 0 <= rank < size and the group is present
  // exactly when size > 1, with matching size and rank.
  void validate(const std::string& what) const;

  // The group of an enabled context (aspen::Error naming `what` if there is none).
  // A copy, because collectives are non-const operations on the handle.
  ProcessGroupHandle require_group(const std::string& what) const;
};

}  // namespace aspen::parallel
