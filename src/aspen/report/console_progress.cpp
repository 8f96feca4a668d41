#include "aspen/report/console_progress.h"
#include "aspen/report/imports.h"

#include <unistd.h>

#include <cmath>
#include <iomanip>
#include <sstream>

namespace aspen::report {

bool stdout_is_terminal() { return isatty(STDOUT_FILENO) == 1; }

ConsoleProgress::ConsoleProgress(std::ostream& out, bool terminal, int64_t total, int64_t first)
    : out_(out), terminal_(terminal), total_(total), first_(first) {}

std::string ConsoleProgress::duration(double seconds) {
  const int64_t s = std::llround(std::max(0.0, seconds));
  std::ostringstream text;
  if (s < 60) {
    text << s << "s";
  } else if (s < 3600) {
    text << s / 60 << "m" << std::setw(2) << std::setfill('0') << s % 60 << "s";
  } else {
    text << s / 3600 << "h" << std::setw(2) << std::setfill('0') << (s % 3600) / 60 << "m";
  }
  return text.str();
}

void ConsoleProgress::report(int64_t iteration, const nlohmann::json& line) {
  const double seconds = line.value("seconds", 0.0);
  seconds_ += seconds;
  const int64_t done_here = iteration - first_;
  const double per_iteration = done_here > 0 ? seconds_ / static_cast<double>(done_here) : 0.0;
  const int width = static_cast<int>(std::to_string(total_).size());
  std::ostringstream text;
  text << std::fixed << std::setprecision(3) << "iter " << std::setw(width) << iteration << "/"
       << total_ << "  reward " << line.value("reward_mean", 0.0) << "  acc "
       << line.value("accuracy", 0.0) << "  len " << std::setprecision(1)
       << line.value("response_length_mean", 0.0) << std::setprecision(3) << "  kl "
       << line.value("approx_kl", 0.0) << "  clip " << line.value("clip_frac", 0.0) << "  "
       << std::setprecision(1) << seconds << "s";
  const bool evaluated = line.contains("eval_accuracy");
  if (evaluated) {
    text << "  eval_acc " << std::setprecision(3) << line["eval_accuracy"].get<double>();
  }
  text << std::setprecision(1) << "  (" << per_iteration << " s/it, eta "
       << duration(per_iteration * static_cast<double>(total_ - iteration)) << ")";
  const bool keep = !terminal_ || evaluated || iteration >= total_;
  if (terminal_) out_ << "\r\033[K";  // replace the live line, if one is open
  out_ << text.str();
  if (keep) out_ << "\n";
  open_line_ = !keep;
  out_ << std::flush;
}

void ConsoleProgress::finish() {
  if (open_line_) out_ << "\n" << std::flush;
  open_line_ = false;
}

}  // namespace aspen::report
