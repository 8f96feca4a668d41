#include "aspen/algo/kl_controller.h"

#include <algorithm>

#include "aspen/algo/imports.h"
#include "aspen/util/error.h"

namespace aspen::algo {

KlController KlController::fixed(double coef) {
  check_input(coef >= 0, "KL coefficient must be >= 0", "kl_ctrl.kl_coef");
  return KlController(coef, /*adaptive=*/false, /*target=*/0.0, /*horizon=*/0.0);
}

KlController KlController::adaptive(double init_coef, double target_kl, double horizon) {
  check_input(init_coef >= 0, "KL coefficient must be >= 0", "kl_ctrl.kl_coef");
  check_input(target_kl > 0, "adaptive KL target must be > 0", "kl_ctrl.target_kl");
  check_input(horizon > 0, "adaptive KL horizon must be > 0", "kl_ctrl.horizon");
  return KlController(init_coef, /*adaptive=*/true, target_kl, horizon);
}

void KlController::update(double current_kl, int64_t n_steps) {
  if (!adaptive_) return;
  const double error = std::clamp(current_kl / target_ - 1.0, -0.2, 0.2);
  value_ *= 1.0 + error * static_cast<double>(n_steps) / horizon_;
}

void KlController::restore(double value) {
  check_input(value >= 0, "KL coefficient must be >= 0", "KL controller state");
  value_ = value;
}

}  // namespace aspen::algo
