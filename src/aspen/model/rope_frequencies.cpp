#include "aspen/model/rope_frequencies.h"
#include "aspen/model/imports.h"

#include <algorithm>
#include <cmath>

namespace aspen::model {
namespace {

constexpr double kPi = 3.14159265358979323846;

// YaRN: the dimension whose wavelength makes `rotations` turns over the original
// context (the paper's inverse dimension formula).
double correction_dim(double rotations, double dim, double base, double original_max) {
  return dim * std::log(original_max / (rotations * 2.0 * kPi)) / (2.0 * std::log(base));
}

}  // namespace

torch::Tensor rope_inverse_frequencies(const ModelConfig& config) {
  const int64_t dim = config.head_dim;
  const auto fp32 = torch::TensorOptions().dtype(torch::kFloat);
  const torch::Tensor exponent = torch::arange(0, dim, 2, fp32) / static_cast<double>(dim);
  const torch::Tensor pos_freqs = torch::pow(torch::scalar_tensor(config.rope_theta, fp32), exponent);
  const RopeScaling& yarn = config.rope_scaling;
  if (!yarn.yarn) return 1.0 / pos_freqs;
  const torch::Tensor extrapolation = 1.0 / pos_freqs;
  const torch::Tensor interpolation = 1.0 / (yarn.factor * pos_freqs);
  const double original = static_cast<double>(yarn.original_max_position_embeddings);
  double low = correction_dim(yarn.beta_fast, static_cast<double>(dim), config.rope_theta, original);
  double high = correction_dim(yarn.beta_slow, static_cast<double>(dim), config.rope_theta, original);
  if (yarn.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // as transformers: no division by zero
  const torch::Tensor ramp = ((torch::arange(dim / 2, fp32) - low) / (high - low)).clamp(0.0, 1.0);
  const torch::Tensor extrapolation_share = 1.0 - ramp;
  return interpolation * (1.0 - extrapolation_share) + extrapolation * extrapolation_share;
}

RopeTable model_rope_table(const ModelConfig& config, const torch::Tensor& positions) {
  if (!config.rope_scaling.yarn) {
    return make_rope_table(positions, config.head_dim, config.rope_theta);
  }
  return make_rope_table(positions, rope_inverse_frequencies(config),
                         config.rope_scaling.cos_sin_scale());
}

}  // namespace aspen::model
