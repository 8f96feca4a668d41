// KL coefficient controllers for the KL-in-reward penalty (Ziegler et al. 2019,
// "Fine-Tuning Language Models from Human Preferences"; verl's kl_ctrl).
//
//   fixed:     beta stays at its initial value.
//   adaptive:  after each step with measured KL k over n_steps samples,
//                e    = clip(k / target - 1, -0.2, 0.2)
//                beta = beta * (1 + e * n_steps / horizon)
//              so beta grows while the policy drifts beyond the target and
//              shrinks while it stays inside.
//
// Thread safety: not synchronised; owned by one trainer loop.
#pragma once

#include <cstdint>

#include "aspen/algo/imports.h"

namespace aspen::algo {

class KlController {
 public:
  // Throws aspen::Error for a negative coefficient.
  static KlController fixed(double coef);
  // Throws aspen::Error unless init_coef >= 0, target_kl > 0 and horizon > 0.
  static KlController adaptive(double init_coef, double target_kl, double horizon);

  double value() const { return value_; }
  bool is_adaptive() const { return adaptive_; }
  // No-op for a fixed controller. current_kl: mean KL of the last batch.
  void update(double current_kl, int64_t n_steps);
  // Sets beta, as saved by a checkpoint (resume). aspen::Error when negative.
  void restore(double value);

 private:
  KlController(double value, bool adaptive, double target, double horizon)
      : value_(value), adaptive_(adaptive), target_(target), horizon_(horizon) {}
  double value_;
  bool adaptive_;
  double target_;
  double horizon_;
};

}  // namespace aspen::algo
