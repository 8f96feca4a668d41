#include "aspen/cli/command.h"

#include <algorithm>
#include <map>
#include <vector>

#include "aspen/cli/imports.h"

namespace aspen::cli {
namespace {

struct Registered {
  int order;
  CommandSetup setup;
};

std::vector<Registered>& registry() {
  static std::vector<Registered> commands;
  return commands;
}

std::map<const CLI::App*, CommandAction>& actions() {
  static std::map<const CLI::App*, CommandAction> by_app;
  return by_app;
}

}  // namespace

bool register_command(int order, CommandSetup setup) {
  registry().push_back({order, std::move(setup)});
  return true;
}

void on_run(CLI::App* command, CommandAction action) {
  actions()[command] = std::move(action);
}

CLI::App& bench_group(CLI::App& root) {
  for (CLI::App* sub : root.get_subcommands({})) {
    if (sub->get_name() == "bench") return *sub;
  }
  CLI::App* bench = root.add_subcommand("bench", "Benchmarks; each prints one JSON object");
  bench->require_subcommand(1);
  return *bench;
}

void register_all_commands(CLI::App& root) {
  auto commands = registry();
  std::stable_sort(commands.begin(), commands.end(),
                   [](const Registered& a, const Registered& b) { return a.order < b.order; });
  for (auto& command : commands) command.setup(root);
}

int run_selected_command(CLI::App& root) {
  const CommandAction* deepest = nullptr;
  CLI::App* current = &root;
  while (current != nullptr) {
    auto it = actions().find(current);
    if (it != actions().end()) deepest = &it->second;
    auto selected = current->get_subcommands();
    current = selected.empty() ? nullptr : selected.front();
  }
  return deepest != nullptr ? (*deepest)() : 1;
}

}  // namespace aspen::cli
