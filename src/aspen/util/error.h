// aspen::Error: the one exception type library code throws for bad input or a
// failed operation. It carries what failed, the input that caused it (a file,
// a line, a config key path, a request field) and an optional hint, so `main`
// can print one clear line and exit non-zero. Internal invariants use
// TORCH_CHECK / assert instead: those are bugs, not user errors.
#pragma once

#include <stdexcept>
#include <string>

namespace aspen {

class Error : public std::runtime_error {
 public:
  // `problem`: what went wrong ("header length 9000 exceeds file size 120").
  // `input`: where ("model.safetensors", "config.yaml: train.lr", "stdin line 3").
  // `hint`: what to do about it; may be empty.
  explicit Error(std::string problem, std::string input = {}, std::string hint = {});

  const std::string& problem() const { return problem_; }
  const std::string& input() const { return input_; }
  const std::string& hint() const { return hint_; }

 private:
  std::string problem_;
  std::string input_;
  std::string hint_;
};

// Throws Error(problem, input, hint) unless `condition` holds. For input validation only.
inline void check_input(bool condition, const std::string& problem, const std::string& input,
                        const std::string& hint = {}) {
  if (!condition) throw Error(problem, input, hint);
}

}  // namespace aspen
