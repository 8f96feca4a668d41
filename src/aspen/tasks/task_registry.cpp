#include "aspen/tasks/task_registry.h"

#include "aspen/tasks/arithmetic_task.h"
#include "aspen/tasks/countdown_task.h"
#include "aspen/tasks/imports.h"
#include "aspen/util/error.h"

namespace aspen::tasks {

std::vector<std::string> task_names() {
  return {"arithmetic", "countdown"};
}

std::unique_ptr<Task> make_task(const std::string& name, const nlohmann::json& options) {
  if (name == "arithmetic") return std::make_unique<ArithmeticTask>(options);
  if (name == "countdown") return std::make_unique<CountdownTask>(options);
  std::string known;
  for (const std::string& task : task_names()) known += (known.empty() ? "" : ", ") + task;
  throw Error("unknown task \"" + name + "\"", "task", "known tasks: " + known);
}

}  // namespace aspen::tasks
