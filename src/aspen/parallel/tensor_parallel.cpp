#include "aspen/parallel/tensor_parallel.h"

#include <string>

#include "aspen/parallel/imports.h"
#include "aspen/util/error.h"

namespace aspen::parallel {

TensorParallel TensorParallel::over(const ProcessGroupHandle& group) {
  TensorParallel tp;
  tp.size = group.world_size();
  tp.rank = group.rank();
  if (tp.size > 1) tp.group = group;
  return tp;
}

void TensorParallel::validate(const std::string& what) const {
  check_input(size >= 1 && rank >= 0 && rank < size,
              "TP rank " + std::to_string(rank) + " is not in [0, " + std::to_string(size) + ")",
              what);
  if (size == 1) return;
  check_input(group.has_value(), "TP size " + std::to_string(size) + " needs a process group",
              what);
  check_input(group->world_size() == size && group->rank() == rank,
              "the process group has rank " + std::to_string(group->rank()) + " of " +
                  std::to_string(group->world_size()) + ", the TP context says rank " +
                  std::to_string(rank) + " of " + std::to_string(size),
              what);
}

ProcessGroupHandle TensorParallel::require_group(const std::string& what) const {
  check_input(group.has_value(), "needs a tensor-parallel process group (TP size > 1)", what);
  return *group;
}

}  // namespace aspen::parallel
