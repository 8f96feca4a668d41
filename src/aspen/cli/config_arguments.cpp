#include "aspen/cli/config_arguments.h"

#include <optional>

namespace aspen::cli {

Config config_from_arguments(const std::vector<std::string>& arguments) {
  std::optional<Config> config;
  std::vector<std::string> overrides;
  for (const auto& argument : arguments) {
    if (argument.find('=') != std::string::npos) {
      overrides.push_back(argument);
    } else {
      check_input(!config, "more than one config file given", argument);
      config = Config::load_file(argument);
    }
  }
  if (!config) config = Config::empty("built-in defaults");
  for (const auto& assignment : overrides) config->apply_override(assignment);
  return *config;
}

}  // namespace aspen::cli
