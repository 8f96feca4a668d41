// `aspen launch --nproc-per-node N [--nnodes M --node-rank R --master-addr A
//  --master-port P] [--rdzv-timeout S] [--grace-period S] [--tolerate-exit RANKS]
//  -- CMD ARGS...`:
// starts N ranks of CMD on this node with torchrun's environment and supervises them
// (parallel/launcher.h). Run it once per node with the same --nnodes, --master-addr
// and --master-port. Exit status: 0 only if every rank exits 0.
#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "aspen/cli/command.h"
#include "aspen/cli/imports.h"
#include "aspen/parallel/launcher.h"
#include "aspen/util/error.h"

namespace aspen::cli {
// Named, not anonymous: the CLI is a unity build (one namespace per subcommand file).
namespace launch_command {

// "1,2,5" -> {1, 2, 5}; aspen::Error naming `option` for anything but ranks >= 0.
std::vector<int> parse_rank_list(const std::string& text, const std::string& option) {
  std::vector<int> ranks;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    const bool digits =
        !item.empty() && item.size() < 9 &&
        std::all_of(item.begin(), item.end(), [](char c) { return c >= '0' && c <= '9'; });
    check_input(digits, "'" + item + "' is not a rank", option + " " + text,
                "give global ranks separated by commas, e.g. 1,2");
    ranks.push_back(std::stoi(item));
  }
  return ranks;
}

void setup(CLI::App& root) {
  auto options = std::make_shared<LaunchOptions>();
  CLI::App* command = root.add_subcommand(
      "launch", "start N ranks of a command (torchrun conventions) and supervise them");
  command->add_option("--nproc-per-node", options->nproc_per_node, "ranks on this node")
      ->required();
  command->add_option("--nnodes", options->nnodes, "number of nodes")->capture_default_str();
  command->add_option("--node-rank", options->node_rank, "this node's index in [0, nnodes)")
      ->capture_default_str();
  command->add_option("--master-addr", options->master_addr, "host of rank 0")
      ->capture_default_str();
  command
      ->add_option("--master-port", options->master_port,
                   "rank 0's rendezvous port (0: a free one, single node only)")
      ->capture_default_str();
  command->add_option("--rdzv-timeout", options->rdzv_timeout_s,
                      "seconds the ranks wait for each other at start-up (0: their default, 300)");
  command
      ->add_option("--grace-period", options->grace_period_s,
                   "seconds between SIGTERM and SIGKILL when stopping the ranks")
      ->capture_default_str();
  auto tolerate = std::make_shared<std::string>();
  command->add_option("--tolerate-exit", *tolerate,
                      "comma-separated global ranks whose failure does not stop the others "
                      "(e.g. the rollout ranks under pipeline.on_instance_failure: regenerate)");
  command->add_option("cmd", options->command, "the command each rank runs (after --)")->required();
  on_run(command, [options, tolerate] {
    options->tolerate_exit = parse_rank_list(*tolerate, "--tolerate-exit");
    return launch(*options);
  });
}

ASPEN_REGISTER_COMMAND(90, setup);

}  // namespace launch_command
}  // namespace aspen::cli
