// `aspen report RUN_DIR [--out FILE]`: writes the run's self-contained HTML report
// (report/run_report.h), by default RUN_DIR/report.html, and prints its path.
#include <filesystem>
#include <iostream>

#include "aspen/cli/command.h"
#include "aspen/cli/imports.h"
#include "aspen/report/run_report.h"
#include "aspen/util/file.h"

namespace aspen::cli {
// Named, not anonymous: the CLI is a unity build (one namespace per subcommand file).
namespace report_command {

struct ReportOptions {
  std::string run_dir;
  std::string out;
};

int run_report(const ReportOptions& options) {
  const std::string out = options.out.empty()
                              ? (std::filesystem::path(options.run_dir) / "report.html").string()
                              : options.out;
  // The output before the report is rendered (util/file.h: a device or FIFO is refused);
  // with the default name, a missing RUN_DIR is render_run_report's to name.
  if (!options.out.empty() || std::filesystem::is_directory(options.run_dir)) {
    check_output_file(out, "--out");
  }
  const std::string html = render_run_report(options.run_dir);
  write_file_atomic(out, html);
  std::cout << out << "\n";
  return 0;
}

void setup(CLI::App& root) {
  auto options = std::make_shared<ReportOptions>();
  CLI::App* command = root.add_subcommand(
      "report", "Write a run's metrics as one self-contained HTML page (charts, summary, config)");
  command->add_option("run_dir", options->run_dir, "the run directory (train/sft --out)")
      ->required();
  command->add_option("--out", options->out, "the HTML file (default: RUN_DIR/report.html)");
  on_run(command, [options] { return run_report(*options); });
}

ASPEN_REGISTER_COMMAND(4, setup);

}  // namespace report_command
}  // namespace aspen::cli
