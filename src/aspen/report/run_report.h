// The run report: one self-contained HTML page (no scripts, no files or fonts from
// elsewhere: it opens from a mail attachment or an air-gapped machine) that shows a
// run directory's metrics.jsonl as charts, with summary.json and config.json beside
// them. `aspen report RUN_DIR` writes it as RUN_DIR/report.html.
//
// Charts (x = RL iteration; one chart per metric group, only for metrics the run logged):
// reward, accuracy (training samples and the periodic eval), response length, KL,
// entropy, clip fraction, grad norm, each bubble fraction, stage seconds, the
// rollout/trainer log-prob mismatch, throughput; and the SFT loss by step when the run
// had an SFT phase. A table gives each stage's total seconds and share of the run.
// A series holds every value of its key in metrics.jsonl, whichever line carries it:
// the eval before RL has a "phase": "eval" line, the periodic evals (logging.eval_every
// and the last iteration) are eval_accuracy on RL iteration lines. Each chart's series
// name their key and x key (svg_chart.h's data-source / data-x-source attributes).
//
// Errors: aspen::Error naming the file (and line) for a missing or malformed
// metrics.jsonl, summary.json or config.json; a run with no metric lines at all is an
// error too (nothing to report).
#pragma once

#include <string>

#include "aspen/report/imports.h"

namespace aspen::report {

std::string render_run_report(const std::string& run_dir);

}  // namespace aspen::report
