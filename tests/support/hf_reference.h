// Runs HF transformers, the model reference (tools/python/hf_reference.py), from a test.
//
// Importing transformers takes seconds, so a test hands all its jobs to one `run`
// process: make a model, score tokens, decode greedily, in order, one JSON result per
// job (see the script's docstring for the keys). CTest runs every test in a process of
// its own, so a test should make the models it needs in the same call that queries them.
#pragma once

#include <sys/wait.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/oracles.h"

namespace aspen::testing {

struct HfReferenceRun {
  int exit_status = -1;
  std::string errors;                   // the script's stderr
  std::vector<nlohmann::json> results;  // one per job that finished

  // Every job answered. Use as ASSERT_TRUE(run.ok()) << run.errors.
  bool ok(size_t jobs) const { return exit_status == 0 && results.size() == jobs; }
};

inline nlohmann::json hf_make_job(const std::string& out, nlohmann::json options) {
  options["op"] = "make";
  options["out"] = out;
  return options;
}

inline nlohmann::json hf_logprobs_job(const std::string& model,
                                      const std::vector<int64_t>& tokens) {
  return {{"op", "logprobs"}, {"model", model}, {"tokens", tokens}};
}

inline nlohmann::json hf_greedy_job(const std::string& model, const std::vector<int64_t>& tokens,
                                    int64_t max_new_tokens) {
  return {
      {"op", "greedy"}, {"model", model}, {"tokens", tokens}, {"max_new_tokens", max_new_tokens}};
}

// Prompts for parity tests on a model with `vocab` ids: lengths 1, 5, 11 and 24 (a
// one-token sequence has nothing to score but must not shift the others in a packed
// batch), ids 0 and vocab - 1 included, the rest spread over the whole vocabulary.
inline std::vector<std::vector<int64_t>> parity_prompts(int64_t vocab) {
  std::vector<int64_t> spread;
  uint64_t state = 12345;
  for (int i = 0; i < 24; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;  // Knuth's LCG
    spread.push_back(static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(vocab)));
  }
  return {
      {1, vocab - 1, 17, 42, 42, 42, 0, 5, 99 % vocab, 7, 3}, {vocab - 1}, {3, 1, 4, 1, 5}, spread};
}

// Runs `jobs` in one process; `scratch` (created if missing) holds its stdin/stdout/stderr.
// `script`: tools/python/hf_reference.py, or peft_oracle.py, which takes the same jobs
// and PEFT's besides.
inline HfReferenceRun run_hf_reference(const std::vector<nlohmann::json>& jobs,
                                       const std::string& scratch,
                                       const std::string& script = "hf_reference.py") {
  std::filesystem::create_directories(scratch);
  const std::string in = scratch + "/hf_jobs.jsonl";
  const std::string out = scratch + "/hf_results.jsonl";
  const std::string err = scratch + "/hf_stderr.txt";
  {
    std::ofstream file(in);
    for (const nlohmann::json& job : jobs) file << job.dump() << "\n";
  }
  const std::string command = "'" + python() + "' '" + oracle_script(script) +
                              "' run < '" + in + "' > '" + out + "' 2> '" + err + "'";
  HfReferenceRun run;
  const int status = std::system(command.c_str());
  run.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream errors(err);
  std::stringstream text;
  text << errors.rdbuf();
  run.errors = command + "\n" + text.str();
  std::ifstream results(out);
  for (std::string line; std::getline(results, line);) {
    run.results.push_back(nlohmann::json::parse(line));
  }
  return run;
}

// A random-weight Qwen3 model directory written by transformers with the real Qwen3
// tokenizer beside it (tokenizer.json and tokenizer_config.json): a checkpoint as a
// user downloads one, for tests that run the CLI on it. `model`: hf_make_job's
// options (arch, vocab, seed, dtype, eos_token_id, ...). Returns `dir`.
inline std::string hf_model_dir_with_qwen3_tokenizer(const std::string& dir,
                                                     const nlohmann::json& model,
                                                     const std::string& scratch) {
  const std::vector<nlohmann::json> jobs = {hf_make_job(dir, model)};
  const HfReferenceRun written = run_hf_reference(jobs, scratch);
  if (!written.ok(jobs.size())) throw std::runtime_error("hf_reference make: " + written.errors);
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
    std::filesystem::copy_file(qwen3_tokenizer_dir() + "/" + file, dir + "/" + file,
                               std::filesystem::copy_options::overwrite_existing);
  }
  return dir;
}

}  // namespace aspen::testing
