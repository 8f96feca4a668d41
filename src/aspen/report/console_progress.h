// ConsoleProgress: the RL loop's console report, one report per iteration with the
// iteration out of the total, the rate and the estimated time left.
//
//   iter  12/50  reward 0.615  acc 0.594  len 7.2  kl 0.004  clip 0.031  2.9s  eval_acc 0.870
//        2.9 s/it  eta 1m50s
//
// On a terminal, the line of an iteration without an evaluation is redrawn in place
// (carriage return and erase-line) so that a long run keeps one live line; an
// iteration with an evaluation, and the last one, end with a newline and stay. Not on a
// terminal (a log file, CI), every iteration is one plain line with no control
// characters. The rate is the mean of this process's RL iterations so far (so a
// resumed run estimates from its own iterations); the ETA is that mean times the
// iterations left.
// Thread safety: one owner (the driver thread).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "aspen/report/imports.h"

namespace aspen::report {

class ConsoleProgress {
 public:
  // `total`: the run's last iteration (train.iterations); `first`: iterations done
  // before this process started (a resume).
  ConsoleProgress(std::ostream& out, bool terminal, int64_t total, int64_t first);
  // Reports iteration `iteration` (1-based) from its metrics line.
  void report(int64_t iteration, const nlohmann::json& line);
  // Ends a line left open on a terminal.
  void finish();

  // "45s", "3m07s", "2h05m".
  static std::string duration(double seconds);

 private:
  std::ostream& out_;
  bool terminal_;
  int64_t total_;
  int64_t first_;
  double seconds_ = 0.0;
  bool open_line_ = false;
};

// Whether stdout is a terminal.
bool stdout_is_terminal();

}  // namespace aspen::report
