// make_task: builds a built-in task by name from JSON options, for configs and the CLI.
// Throws aspen::Error for an unknown name (listing the known ones) or bad options.
// Thread safety: a free function with no shared state.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aspen/tasks/imports.h"
#include "aspen/tasks/task.h"

namespace aspen::tasks {

std::unique_ptr<Task> make_task(const std::string& name,
                                const nlohmann::json& options = nlohmann::json::object());

// "arithmetic", "countdown".
std::vector<std::string> task_names();

}  // namespace aspen::tasks
