// PythonTool ("python"): runs model-written Python in a sandboxed subprocess
// (sandboxed_process.h: rlimits on CPU time, address space and file size, a wall
// timeout that kills the process group, no network through `unshare -n` where
// available, a fresh temporary working directory removed afterwards).
//
// Arguments: {"code": "<python source>"}, written to main.py in the run's directory and
// run as `python -u -B main.py`. The observation is what the program printed, stdout and
// stderr interleaved, made valid UTF-8 (invalid bytes become U+FFFD) and cut to
// max_output_bytes at a character boundary, with a line saying how much was cut:
//   - exit status 0: the output ("(no output)" when there was none), ok;
//   - anything else: "error: <what happened>" then the output (a traceback, usually):
//     "exit status 1", "timed out after 10 s (killed)", "CPU time limit of 10 s
//     exceeded", "file size limit of N bytes exceeded", "killed by signal 9".
//     A memory bomb meets RLIMIT_AS and usually ends in Python's own MemoryError; Python
//     ignores SIGXFSZ, so a file grown past the limit ends in "OSError: [Errno 27] File
//     too large" (exit status 1) rather than the signal.
// Thread safety: stateless; call() is safe concurrently (one process per call).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "aspen/agent/imports.h"
#include "aspen/agent/sandboxed_process.h"
#include "aspen/agent/tool.h"

namespace aspen::agent {

struct PythonToolOptions {
  std::string python = "python3";  // an absolute path, or a name looked up in PATH
  SandboxLimits limits;
};

class PythonTool : public Tool {
 public:
  explicit PythonTool(PythonToolOptions options = {});

  const std::string& name() const override { return name_; }
  const nlohmann::ordered_json& schema() const override { return schema_; }
  ToolResult call(const nlohmann::ordered_json& arguments) const override;

 private:
  std::string name_ = "python";
  PythonToolOptions options_;
  nlohmann::ordered_json schema_;
};

// The observation text of a run: `run.output` made valid UTF-8 and cut at a character
// boundary to `max_bytes`, plus the truncation line when anything was cut.
std::string sandbox_output_text(const SandboxRun& run, size_t max_bytes);

}  // namespace aspen::agent
