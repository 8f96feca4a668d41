// The modes of aspen_dist_worker. Each worker/*_modes.cpp registers its modes with a
// static RegisterWorkerMode, so concerns (data parallel, tensor parallel, resharding,
// checkpoints) keep their rank programs in their own files.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "aspen/parallel/process_group.h"

namespace aspen::testing {

using namespace aspen::parallel;

struct WorkerMode {
  std::string name;
  std::string usage;  // "NAME ARGS..." for the error message
  // args: the arguments after the mode name. Returns the exit code.
  std::function<int(ProcessGroupHandle& group, const std::vector<std::string>& args)> run;
};

inline std::vector<WorkerMode>& worker_modes() {
  static std::vector<WorkerMode> modes;
  return modes;
}

struct RegisterWorkerMode {
  explicit RegisterWorkerMode(WorkerMode mode) { worker_modes().push_back(std::move(mode)); }
};

}  // namespace aspen::testing
