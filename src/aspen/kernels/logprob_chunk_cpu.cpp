#include "aspen/kernels/logprob_chunk_cpu.h"

#include <ATen/Parallel.h>
#include <immintrin.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "aspen/kernels/cpu_features.h"
#include "aspen/kernels/imports.h"

// Every helper carries the same target attributes, so they inline into the row loops;
// the instruction sets are checked at run time (logprob_chunk_cpu_applies), so the build
// needs no -march flag.
#define ASPEN_CHUNK_TARGET __attribute__((target("avx512f,avx512bw,avx512vl")))
#define ASPEN_CHUNK_INLINE ASPEN_CHUNK_TARGET __attribute__((always_inline)) inline

namespace aspen::kernels {
namespace {

constexpr int64_t kLanes = 16;
// GCC 12 writes the unmasked forms of max/min/scalef/roundscale/shifts/widening/narrowing through
// an undefined register (a -Wmaybe-uninitialized in every user): the zero-masked forms with every
// lane set are the same instructions without it.
constexpr __mmask16 kAllLanes = 0xFFFF;
constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

ASPEN_CHUNK_INLINE __mmask16 tail_mask(int64_t count) {
  return static_cast<__mmask16>((1u << count) - 1);
}

// 16 logits as fp32; lanes past `count` are `fill`.
ASPEN_CHUNK_INLINE __m512 load16(const float* p, int64_t count, __m512 fill) {
  return count >= kLanes ? _mm512_loadu_ps(p) : _mm512_mask_loadu_ps(fill, tail_mask(count), p);
}
ASPEN_CHUNK_INLINE __m512 load16(const uint16_t* p, int64_t count, __m512 fill) {
  const __m256i half = count >= kLanes ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))
                                       : _mm256_maskz_loadu_epi16(tail_mask(count), p);
  // bf16 is the top half of an fp32: widen and shift.
  const __m512 wide = _mm512_castsi512_ps(
      _mm512_maskz_slli_epi32(kAllLanes, _mm512_maskz_cvtepu16_epi32(kAllLanes, half), 16));
  return count >= kLanes ? wide : _mm512_mask_mov_ps(fill, tail_mask(count), wide);
}

ASPEN_CHUNK_INLINE void store16(float* p, int64_t count, __m512 v) {
  if (count >= kLanes) {
    _mm512_storeu_ps(p, v);
  } else {
    _mm512_mask_storeu_ps(p, tail_mask(count), v);
  }
}
// fp32 -> bf16 rounded to nearest even (c10::BFloat16's rounding; NaN stays a NaN).
ASPEN_CHUNK_INLINE void store16(uint16_t* p, int64_t count, __m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i lsb =
      _mm512_and_si512(_mm512_maskz_srli_epi32(kAllLanes, bits, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_add_epi32(bits, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), lsb));
  __m512i top = _mm512_maskz_srli_epi32(kAllLanes, rounded, 16);
  top =
      _mm512_mask_mov_epi32(top, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_set1_epi32(0x7FC0));
  const __m256i half = _mm512_maskz_cvtepi32_epi16(kAllLanes, top);
  if (count >= kLanes) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), half);
  } else {
    _mm256_mask_storeu_epi16(p, tail_mask(count), half);
  }
}

// e^x: x = k ln2 + r with |r| <= ln2 / 2, e^r by Cephes' expf polynomial, times 2^k
// (vscalefps, which also flushes the clamped low end to 0). The constant comes first in
// max/min so that a NaN (their second operand) passes through.
ASPEN_CHUNK_INLINE __m512 exp16(__m512 x) {
  x = _mm512_maskz_min_ps(kAllLanes, _mm512_set1_ps(88.7f),
                          _mm512_maskz_max_ps(kAllLanes, _mm512_set1_ps(-104.0f), x));
  const __m512 k =
      _mm512_maskz_roundscale_ps(kAllLanes, _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_maskz_scalef_ps(kAllLanes, p, k);
}

// Across lanes through memory: GCC 12's _mm512_reduce_* read an undefined register (a
// -Wuninitialized warning in every user).
ASPEN_CHUNK_INLINE float lanes_max(__m512 v) {
  alignas(64) float lanes[kLanes];
  _mm512_store_ps(lanes, v);
  float best = lanes[0];
  for (int i = 1; i < kLanes; ++i) best = std::max(best, lanes[i]);
  return best;
}
ASPEN_CHUNK_INLINE float lanes_sum(__m512 v) {
  alignas(64) float lanes[kLanes];
  _mm512_store_ps(lanes, v);
  float sum = 0.f;
  for (float lane : lanes) sum += lane;
  return sum;
}

// z = logit / temperature, as the composed path divides (not a reciprocal multiply).
ASPEN_CHUNK_INLINE __m512 scaled_logits(__m512 logit, bool divide, __m512 temperature) {
  return divide ? _mm512_div_ps(logit, temperature) : logit;
}

struct StatsArgs {
  int64_t n, begin;
  float temperature;
  bool with_entropy;
  const int64_t* targets;
  float *running_max, *sum_exp, *sum_exp_logit, *target_logit;
};

template <typename Elem>
ASPEN_CHUNK_TARGET void stats_rows(const Elem* logits, const StatsArgs& a, int64_t row_begin,
                                   int64_t row_end) {
  const bool divide = a.temperature != 1.0f;
  const __m512 temperature = _mm512_set1_ps(a.temperature);
  const __m512 minus_inf = _mm512_set1_ps(kMinusInf);
  for (int64_t t = row_begin; t < row_end; ++t) {
    const Elem* row = logits + t * a.n;
    __m512 vmax = minus_inf;
    for (int64_t v = 0; v < a.n; v += kLanes) {
      vmax = _mm512_maskz_max_ps(kAllLanes, vmax, load16(row + v, a.n - v, minus_inf));
    }
    // Division by a positive temperature keeps the order, so max(z) = max(logit) / T.
    float chunk_max = lanes_max(vmax);
    if (divide) chunk_max /= a.temperature;
    const float old_max = a.running_max[t];
    const float new_max = std::max(old_max, chunk_max);
    const __m512 shift = _mm512_set1_ps(new_max);
    __m512 vsum = _mm512_setzero_ps(), vsum_logit = _mm512_setzero_ps();
    for (int64_t v = 0; v < a.n; v += kLanes) {
      const int64_t count = a.n - v;
      const __m512 z = scaled_logits(load16(row + v, count, minus_inf), divide, temperature);
      __m512 e = exp16(_mm512_sub_ps(z, shift));  // padding lanes: exp(-inf) = 0
      if (count < kLanes) e = _mm512_maskz_mov_ps(tail_mask(count), e);
      vsum = _mm512_add_ps(vsum, e);
      if (a.with_entropy) {
        vsum_logit = _mm512_add_ps(
            vsum_logit, _mm512_maskz_mul_ps(count >= kLanes ? kAllLanes : tail_mask(count), e, z));
      }
    }
    const float rescale = std::exp(old_max - new_max);  // 0 on the first chunk (-inf)
    a.sum_exp[t] = a.sum_exp[t] * rescale + lanes_sum(vsum);
    if (a.with_entropy) a.sum_exp_logit[t] = a.sum_exp_logit[t] * rescale + lanes_sum(vsum_logit);
    a.running_max[t] = new_max;
    const int64_t local = a.targets[t] - a.begin;
    if (local >= 0 && local < a.n) {
      float z;
      if constexpr (std::is_same_v<Elem, float>) {
        z = row[local];
      } else {
        z = static_cast<float>(c10::BFloat16(row[local], c10::BFloat16::from_bits()));
      }
      a.target_logit[t] += divide ? z / a.temperature : z;
    }
  }
}

struct GradArgs {
  int64_t n, begin;
  float temperature;
  const int64_t* targets;
  const float *lse, *grad_lp, *grad_ent, *mean_logit;  // grad_lp, grad_ent may be null
};

// 16 logits' gradient in the composed order: -(p grad_lp), + grad_lp in the `target`
// lanes, + p (E[z] - z) grad_ent (with `entropy`), then / temperature.
ASPEN_CHUNK_INLINE __m512 grad16(__m512 z, __m512 lse, __m512 grad_lp, __m512 grad_ent, __m512 mean,
                                 bool entropy, __mmask16 target, bool divide, __m512 temperature) {
  const __m512 p = exp16(_mm512_sub_ps(z, lse));
  __m512 g = _mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(p, grad_lp));
  g = _mm512_mask_add_ps(g, target, g, grad_lp);
  if (entropy) {
    g = _mm512_add_ps(g, _mm512_mul_ps(_mm512_mul_ps(p, _mm512_sub_ps(mean, z)), grad_ent));
  }
  return divide ? _mm512_div_ps(g, temperature) : g;
}

template <typename Elem, typename Out>
ASPEN_CHUNK_TARGET void grad_rows(const Elem* logits, Out* grad_z, const GradArgs& a,
                                  int64_t row_begin, int64_t row_end) {
  const bool divide = a.temperature != 1.0f;
  const bool entropy = a.grad_ent != nullptr;
  const __m512 temperature = _mm512_set1_ps(a.temperature);
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t t = row_begin; t < row_end; ++t) {
    const Elem* row = logits + t * a.n;
    Out* out = grad_z + t * a.n;
    const __m512 lse = _mm512_set1_ps(a.lse[t]);
    const __m512 grad_lp = _mm512_set1_ps(a.grad_lp != nullptr ? a.grad_lp[t] : 0.f);
    const __m512 grad_ent = _mm512_set1_ps(entropy ? a.grad_ent[t] : 0.f);
    const __m512 mean = _mm512_set1_ps(entropy ? a.mean_logit[t] : 0.f);
    const int64_t local = a.grad_lp != nullptr ? a.targets[t] - a.begin : -1;
    for (int64_t v = 0; v < a.n; v += kLanes) {
      const int64_t count = a.n - v;
      const __m512 z = scaled_logits(load16(row + v, count, zero), divide, temperature);
      const __mmask16 target =
          local >= v && local < v + kLanes ? static_cast<__mmask16>(1u << (local - v)) : 0;
      store16(out + v, count,
              grad16(z, lse, grad_lp, grad_ent, mean, entropy, target, divide, temperature));
    }
  }
}

// The transposed layout: logits_t [n, T], vocabulary rows by tokens, 16 tokens per
// vector, so each token's statistics live in lanes and every pass reads rows front to
// back.

// Rows of the chunk per online-softmax step: a 16-token vector's 64 rows (2-4 KB) stay
// in L1 between the max pass and the exp pass, and the rest of their cache lines (the
// next vector's tokens) in L2 until that vector comes.
constexpr int64_t kRowGroup = 64;

// Tokens [t_begin, t_end) (t_begin a multiple of 16) over every row of the chunk.
template <typename Elem>
ASPEN_CHUNK_TARGET void stats_columns(const Elem* logits_t, const StatsArgs& a, int64_t tokens,
                                      int64_t t_begin, int64_t t_end) {
  const bool divide = a.temperature != 1.0f;
  const __m512 temperature = _mm512_set1_ps(a.temperature);
  const __m512 minus_inf = _mm512_set1_ps(kMinusInf);
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t t = t_begin; t < t_end; t += kLanes) {
    const int64_t count = t_end - t;
    const __mmask16 lanes = count >= kLanes ? kAllLanes : tail_mask(count);
    __m512 running_max = load16(a.running_max + t, count, minus_inf);
    __m512 sum = load16(a.sum_exp + t, count, zero);
    __m512 sum_logit = a.with_entropy ? load16(a.sum_exp_logit + t, count, zero) : zero;
    for (int64_t g = 0; g < a.n; g += kRowGroup) {
      const int64_t g_end = std::min(a.n, g + kRowGroup);
      __m512 group_max = minus_inf;
      for (int64_t j = g; j < g_end; ++j) {
        group_max = _mm512_maskz_max_ps(kAllLanes, group_max,
                                        load16(logits_t + j * tokens + t, count, minus_inf));
      }
      // Division by a positive temperature keeps the order: max(z) = max(logit) / T.
      if (divide) group_max = _mm512_div_ps(group_max, temperature);
      const __m512 new_max = _mm512_maskz_max_ps(kAllLanes, running_max, group_max);
      // exp(m - m'): 0 while m is -inf (exp16 clamps its argument from below).
      const __m512 rescale = exp16(_mm512_sub_ps(running_max, new_max));
      __m512 group_sum = zero, group_sum_logit = zero;
      for (int64_t j = g; j < g_end; ++j) {
        const __m512 z =
            scaled_logits(load16(logits_t + j * tokens + t, count, minus_inf), divide, temperature);
        const __m512 e = _mm512_maskz_mov_ps(lanes, exp16(_mm512_sub_ps(z, new_max)));
        group_sum = _mm512_add_ps(group_sum, e);
        if (a.with_entropy)
          group_sum_logit = _mm512_add_ps(group_sum_logit, _mm512_maskz_mul_ps(lanes, e, z));
      }
      sum = _mm512_add_ps(_mm512_mul_ps(sum, rescale), group_sum);
      if (a.with_entropy)
        sum_logit = _mm512_add_ps(_mm512_mul_ps(sum_logit, rescale), group_sum_logit);
      running_max = new_max;
    }
    store16(a.running_max + t, count, running_max);
    store16(a.sum_exp + t, count, sum);
    if (a.with_entropy) store16(a.sum_exp_logit + t, count, sum_logit);
  }
  for (int64_t t = t_begin; t < t_end; ++t) {
    const int64_t local = a.targets[t] - a.begin;
    if (local < 0 || local >= a.n) continue;
    float z;
    if constexpr (std::is_same_v<Elem, float>) {
      z = logits_t[local * tokens + t];
    } else {
      z = static_cast<float>(
          c10::BFloat16(logits_t[local * tokens + t], c10::BFloat16::from_bits()));
    }
    a.target_logit[t] += divide ? z / a.temperature : z;
  }
}

// Rows [row_begin, row_end) of grad_z_t [n, T], each over every token. `local` holds
// each token's target row in this chunk (-1: none here, or no grad_lp).
template <typename Elem, typename Out>
ASPEN_CHUNK_TARGET void grad_columns(const Elem* logits_t, Out* grad_z_t, const GradArgs& a,
                                     const int32_t* local, int64_t tokens, int64_t row_begin,
                                     int64_t row_end) {
  const bool divide = a.temperature != 1.0f;
  const bool entropy = a.grad_ent != nullptr;
  const __m512 temperature = _mm512_set1_ps(a.temperature);
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t j = row_begin; j < row_end; ++j) {
    const __m512i row = _mm512_set1_epi32(static_cast<int32_t>(j));
    for (int64_t t = 0; t < tokens; t += kLanes) {
      const int64_t count = tokens - t;
      const __mmask16 lanes = count >= kLanes ? kAllLanes : tail_mask(count);
      const __m512 z =
          scaled_logits(load16(logits_t + j * tokens + t, count, zero), divide, temperature);
      const __m512 grad_lp = a.grad_lp != nullptr ? load16(a.grad_lp + t, count, zero) : zero;
      const __m512 grad_ent = entropy ? load16(a.grad_ent + t, count, zero) : zero;
      const __m512 mean = entropy ? load16(a.mean_logit + t, count, zero) : zero;
      const __mmask16 target =
          _mm512_mask_cmpeq_epi32_mask(lanes, _mm512_maskz_loadu_epi32(lanes, local + t), row);
      store16(grad_z_t + j * tokens + t, count,
              grad16(z, load16(a.lse + t, count, zero), grad_lp, grad_ent, mean, entropy, target,
                     divide, temperature));
    }
  }
}

// Rows per task: a few rows of a 4,096-wide chunk are already 100+ KB of work.
constexpr int64_t kRowGrain = 8;

const float* optional_data(const torch::Tensor& t) {
  return t.defined() ? t.data_ptr<float>() : nullptr;
}

void check_row_vector(const torch::Tensor& t, int64_t tokens, const char* name) {
  TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == torch::kFloat && t.dim() == 1 &&
                  t.size(0) == tokens && t.is_contiguous(),
              "logprob chunk (cpu): ", name, " must be a contiguous [T] fp32 CPU tensor");
}

}  // namespace

bool logprob_chunk_cpu_available() {
  return cpu_has_avx512();
}

bool logprob_chunk_cpu_applies(const torch::Tensor& logits) {
  return cpu_has_avx512() && logits.device().is_cpu() && logits.dim() == 2 &&
         logits.is_contiguous() &&
         (logits.scalar_type() == torch::kFloat || logits.scalar_type() == torch::kBFloat16);
}

namespace {

void check_stats_inputs(int64_t tokens, const torch::Tensor& targets,
                        const torch::Tensor& running_max, const torch::Tensor& sum_exp,
                        const torch::Tensor& sum_exp_logit, const torch::Tensor& target_logit) {
  TORCH_CHECK(
      targets.scalar_type() == torch::kLong && targets.is_contiguous() && targets.numel() == tokens,
      "logprob chunk (cpu): targets must be contiguous [T] int64");
  check_row_vector(running_max, tokens, "running_max");
  check_row_vector(sum_exp, tokens, "sum_exp");
  check_row_vector(sum_exp_logit, tokens, "sum_exp_logit");
  check_row_vector(target_logit, tokens, "target_logit");
}

StatsArgs stats_args(int64_t n, int64_t begin, double temperature, bool with_entropy,
                     const torch::Tensor& targets, torch::Tensor& running_max,
                     torch::Tensor& sum_exp, torch::Tensor& sum_exp_logit,
                     torch::Tensor& target_logit) {
  return {n,
          begin,
          static_cast<float>(temperature),
          with_entropy,
          targets.data_ptr<int64_t>(),
          running_max.data_ptr<float>(),
          sum_exp.data_ptr<float>(),
          sum_exp_logit.data_ptr<float>(),
          target_logit.data_ptr<float>()};
}

void check_grad_inputs(int64_t tokens, const torch::Tensor& targets, const torch::Tensor& lse,
                       const torch::Tensor& grad_lp, const torch::Tensor& grad_ent,
                       const torch::Tensor& mean_logit) {
  TORCH_CHECK(
      targets.scalar_type() == torch::kLong && targets.is_contiguous() && targets.numel() == tokens,
      "logprob chunk (cpu): targets must be contiguous [T] int64");
  check_row_vector(lse, tokens, "lse");
  if (grad_lp.defined()) check_row_vector(grad_lp, tokens, "grad_lp");
  if (grad_ent.defined()) {
    check_row_vector(grad_ent, tokens, "grad_ent");
    check_row_vector(mean_logit, tokens, "mean_logit");
  }
}

void check_logits_and_grad(const torch::Tensor& logits, const torch::Tensor& grad,
                           const char* grad_name) {
  TORCH_CHECK(logprob_chunk_cpu_applies(logits), "logprob chunk (cpu): unsupported logits");
  TORCH_CHECK(logprob_chunk_cpu_applies(grad) && grad.sizes() == logits.sizes(),
              "logprob chunk (cpu): ", grad_name,
              " must be a contiguous fp32/bf16 tensor shaped like the logits");
}

GradArgs grad_args(int64_t n, int64_t begin, double temperature, const torch::Tensor& targets,
                   const torch::Tensor& lse, const torch::Tensor& grad_lp,
                   const torch::Tensor& grad_ent, const torch::Tensor& mean_logit) {
  return {n,
          begin,
          static_cast<float>(temperature),
          targets.data_ptr<int64_t>(),
          lse.data_ptr<float>(),
          optional_data(grad_lp),
          optional_data(grad_ent),
          grad_ent.defined() ? mean_logit.data_ptr<float>() : nullptr};
}

// Calls f with logits and output pointers of their element types (uint16_t: bf16).
template <typename F>
void dispatch_elems(const torch::Tensor& in, torch::Tensor& out, const F& f) {
  const bool bf16_in = in.scalar_type() == torch::kBFloat16;
  const bool bf16_out = out.scalar_type() == torch::kBFloat16;
  const void* i = in.data_ptr();
  void* o = out.data_ptr();
  if (bf16_in && bf16_out) {
    f(static_cast<const uint16_t*>(i), static_cast<uint16_t*>(o));
  } else if (bf16_in) {
    f(static_cast<const uint16_t*>(i), static_cast<float*>(o));
  } else if (bf16_out) {
    f(static_cast<const float*>(i), static_cast<uint16_t*>(o));
  } else {
    f(static_cast<const float*>(i), static_cast<float*>(o));
  }
}

}  // namespace

void logprob_chunk_stats_cpu(const torch::Tensor& logits, double temperature,
                             const torch::Tensor& targets, int64_t begin, bool with_entropy,
                             torch::Tensor& running_max, torch::Tensor& sum_exp,
                             torch::Tensor& sum_exp_logit, torch::Tensor& target_logit) {
  TORCH_CHECK(logprob_chunk_cpu_applies(logits), "logprob chunk (cpu): unsupported logits");
  const int64_t tokens = logits.size(0);
  check_stats_inputs(tokens, targets, running_max, sum_exp, sum_exp_logit, target_logit);
  const StatsArgs args = stats_args(logits.size(1), begin, temperature, with_entropy, targets,
                                    running_max, sum_exp, sum_exp_logit, target_logit);
  const bool bf16 = logits.scalar_type() == torch::kBFloat16;
  const void* data = logits.data_ptr();
  at::parallel_for(0, tokens, kRowGrain, [&](int64_t row_begin, int64_t row_end) {
    if (bf16) {
      stats_rows(static_cast<const uint16_t*>(data), args, row_begin, row_end);
    } else {
      stats_rows(static_cast<const float*>(data), args, row_begin, row_end);
    }
  });
}

void logprob_chunk_grad_cpu(const torch::Tensor& logits, double temperature,
                            const torch::Tensor& targets, int64_t begin, const torch::Tensor& lse,
                            const torch::Tensor& grad_lp, const torch::Tensor& grad_ent,
                            const torch::Tensor& mean_logit, torch::Tensor& grad_z) {
  check_logits_and_grad(logits, grad_z, "grad_z");
  const int64_t tokens = logits.size(0);
  check_grad_inputs(tokens, targets, lse, grad_lp, grad_ent, mean_logit);
  const GradArgs args =
      grad_args(logits.size(1), begin, temperature, targets, lse, grad_lp, grad_ent, mean_logit);
  at::parallel_for(0, tokens, kRowGrain, [&](int64_t row_begin, int64_t row_end) {
    dispatch_elems(logits, grad_z, [&](const auto* in, auto* out) {
      grad_rows(in, out, args, row_begin, row_end);
    });
  });
}

void logprob_chunk_stats_t_cpu(const torch::Tensor& logits_t, double temperature,
                               const torch::Tensor& targets, int64_t begin, bool with_entropy,
                               torch::Tensor& running_max, torch::Tensor& sum_exp,
                               torch::Tensor& sum_exp_logit, torch::Tensor& target_logit) {
  TORCH_CHECK(logprob_chunk_cpu_applies(logits_t), "logprob chunk (cpu): unsupported logits");
  const int64_t n = logits_t.size(0), tokens = logits_t.size(1);
  check_stats_inputs(tokens, targets, running_max, sum_exp, sum_exp_logit, target_logit);
  const StatsArgs args = stats_args(n, begin, temperature, with_entropy, targets, running_max,
                                    sum_exp, sum_exp_logit, target_logit);
  const bool bf16 = logits_t.scalar_type() == torch::kBFloat16;
  const void* data = logits_t.data_ptr();
  const int64_t vectors = (tokens + kLanes - 1) / kLanes;
  at::parallel_for(0, vectors, 1, [&](int64_t vector_begin, int64_t vector_end) {
    const int64_t t_begin = vector_begin * kLanes, t_end = std::min(tokens, vector_end * kLanes);
    if (bf16) {
      stats_columns(static_cast<const uint16_t*>(data), args, tokens, t_begin, t_end);
    } else {
      stats_columns(static_cast<const float*>(data), args, tokens, t_begin, t_end);
    }
  });
}

void logprob_chunk_grad_t_cpu(const torch::Tensor& logits_t, double temperature,
                              const torch::Tensor& targets, int64_t begin, const torch::Tensor& lse,
                              const torch::Tensor& grad_lp, const torch::Tensor& grad_ent,
                              const torch::Tensor& mean_logit, torch::Tensor& grad_z_t) {
  check_logits_and_grad(logits_t, grad_z_t, "grad_z_t");
  const int64_t n = logits_t.size(0), tokens = logits_t.size(1);
  check_grad_inputs(tokens, targets, lse, grad_lp, grad_ent, mean_logit);
  const GradArgs args =
      grad_args(n, begin, temperature, targets, lse, grad_lp, grad_ent, mean_logit);
  std::vector<int32_t> local(static_cast<size_t>(tokens), -1);
  if (grad_lp.defined()) {
    const int64_t* target = targets.data_ptr<int64_t>();
    for (int64_t t = 0; t < tokens; ++t) {
      const int64_t row = target[t] - begin;
      if (row >= 0 && row < n) local[static_cast<size_t>(t)] = static_cast<int32_t>(row);
    }
  }
  at::parallel_for(0, n, kLanes, [&](int64_t row_begin, int64_t row_end) {
    dispatch_elems(logits_t, grad_z_t, [&](const auto* in, auto* out) {
      grad_columns(in, out, args, local.data(), tokens, row_begin, row_end);
    });
  });
}

}  // namespace aspen::kernels
