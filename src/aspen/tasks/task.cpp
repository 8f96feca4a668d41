#include "aspen/tasks/task.h"

#include "aspen/reward/verifier_registry.h"
#include "aspen/tasks/imports.h"

namespace aspen::tasks {

std::unique_ptr<Verifier> Task::make_verifier() const {
  return aspen::reward::make_verifier(verifier_name(), verifier_options());
}

}  // namespace aspen::tasks
