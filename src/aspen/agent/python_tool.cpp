#include "aspen/agent/python_tool.h"

#include <signal.h>

#include <sstream>

#include "aspen/agent/imports.h"
#include "aspen/tokenizer/utf8.h"

namespace aspen::agent {
namespace {

std::string format_seconds(double seconds) {
  std::ostringstream out;
  out << seconds;
  return out.str();
}

// What ended a run that did not exit 0, in words.
std::string failure(const SandboxRun& run, const SandboxLimits& limits) {
  if (run.timed_out)
    return "timed out after " + format_seconds(limits.wall_seconds) + " s (killed)";
  if (run.exited) return "exit status " + std::to_string(run.exit_code);
  // RLIMIT_CPU's soft limit sends SIGXCPU, its hard limit one second later SIGKILL.
  if (run.signal == SIGXCPU) {
    return "CPU time limit of " + std::to_string(limits.cpu_seconds) + " s exceeded";
  }
  if (run.signal == SIGXFSZ) {
    return "file size limit of " + std::to_string(limits.file_size_bytes) + " bytes exceeded";
  }
  return "killed by signal " + std::to_string(run.signal);
}

// The length of `bytes` without a UTF-8 sequence that a cut left incomplete at its end,
// so that the cut does not turn into a replacement character.
size_t complete_prefix(std::string_view bytes) {
  const size_t n = bytes.size();
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(bytes[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: the lead is further back
    const size_t length = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return back < length ? n - back : n;
  }
  return n;
}

}  // namespace

std::string sandbox_output_text(const SandboxRun& run, size_t max_bytes) {
  std::string_view kept(run.output);
  bool cut = run.output_bytes > kept.size();
  if (kept.size() > max_bytes) {
    kept = kept.substr(0, max_bytes);
    cut = true;
  }
  if (cut) kept = kept.substr(0, complete_prefix(kept));
  std::string text;
  utf8::append_lossy(kept, text);
  if (cut) {
    text += "\n[output truncated: showed the first " + std::to_string(kept.size()) + " of " +
            std::to_string(run.output_bytes) + " bytes]";
  }
  return text;
}

PythonTool::PythonTool(PythonToolOptions options) : options_(std::move(options)) {
  // The model is told about the network only when it is really cut off.
  const bool isolated =
      options_.limits.isolate_network && network_isolation() != NetworkIsolation::kNone;
  schema_ = {
      {"type", "function"},
      {"function",
       {{"name", name_},
        {"description",
         "Runs a Python 3 program and returns what it printed (stdout and stderr). Each call "
         "is a fresh process in an empty directory" +
             std::string(isolated ? ", without network," : "") + " limited to " +
             format_seconds(options_.limits.wall_seconds) + " s; print what you need to see."},
        {"parameters",
         {{"type", "object"},
          {"properties",
           {{"code", {{"type", "string"}, {"description", "The Python source to run"}}}}},
          {"required", {"code"}}}}}}};
}

ToolResult PythonTool::call(const nlohmann::ordered_json& arguments) const {
  const char* usage = "the python tool takes {\"code\": \"...\"}";
  if (!arguments.is_object() || !arguments.contains("code") || !arguments["code"].is_string()) {
    return ToolResult::failure(std::string("missing string argument \"code\"; ") + usage);
  }
  for (const auto& [key, value] : arguments.items()) {
    if (key != "code") return ToolResult::failure("unexpected argument \"" + key + "\"; " + usage);
  }
  const SandboxRun run =
      run_sandboxed({options_.python, "-u", "-B", "main.py"},
                    {{"main.py", arguments["code"].get<std::string>()}}, options_.limits);
  const std::string output = sandbox_output_text(run, options_.limits.max_output_bytes);
  if (run.exited && run.exit_code == 0)
    return ToolResult::success(output.empty() ? "(no output)" : output);
  ToolResult result = ToolResult::failure(failure(run, options_.limits));
  if (!output.empty()) result.text += "\n" + output;
  return result;
}

}  // namespace aspen::agent
