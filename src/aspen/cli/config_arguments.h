// The positional arguments of `aspen train` and `aspen sft`: at most one YAML
// config file plus any number of key.sub=value overrides, applied in order.
#pragma once

#include <string>
#include <vector>

#include "aspen/util/config.h"

namespace aspen::cli {

// No file: an empty config (every key takes its default). aspen::Error for two
// files, an unreadable file or a malformed override.
Config config_from_arguments(const std::vector<std::string>& arguments);

}  // namespace aspen::cli
