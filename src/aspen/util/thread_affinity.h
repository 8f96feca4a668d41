// Pinning the calling thread to CPU cores: how the pipeline gives each role its core
// budget on one machine (e.g. rollout on core 0, training on core 1).
// Thread safety: affects only the calling thread.
#pragma once

#include <string>
#include <vector>

namespace aspen {

// Restricts the calling thread to `cores`; empty: no change. A core the machine
// lacks (or a refused call) logs a warning naming `role` and leaves the thread
// unpinned: placement is a performance hint, not a correctness requirement.
void pin_current_thread(const std::vector<int>& cores, const std::string& role);

}  // namespace aspen
