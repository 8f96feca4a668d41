#include "aspen/tasks/task.h"

#include "aspen/reward/verifier_registry.h"

namespace aspen {

std::unique_ptr<Verifier> Task::make_verifier() const {
  return aspen::make_verifier(verifier_name(), verifier_options());
}

}  // namespace aspen
