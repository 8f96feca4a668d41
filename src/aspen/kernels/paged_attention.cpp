#include "aspen/kernels/paged_attention.h"

#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <type_traits>
#include <limits>
#include <vector>

#include "aspen/kernels/cpu_features.h"
#include "aspen/kernels/imports.h"

namespace aspen::kernels {
namespace {

void check_shapes(const torch::Tensor& q, const torch::Tensor& key_cache,
                  const torch::Tensor& value_cache, const torch::Tensor& block_tables,
                  const torch::Tensor& query_start, const torch::Tensor& context_lens) {
  TORCH_CHECK(q.dim() == 3 && key_cache.dim() == 4 && key_cache.sizes() == value_cache.sizes(),
              "paged_attention: q [T, H, D] and caches [N, S, K, D] expected");
  TORCH_CHECK(q.size(2) == key_cache.size(3) && q.size(1) % key_cache.size(2) == 0,
              "paged_attention: head_dim mismatch or H not a multiple of K");
  TORCH_CHECK(block_tables.dim() == 2 && query_start.dim() == 1 && context_lens.dim() == 1 &&
                  query_start.size(0) == context_lens.size(0) + 1 &&
                  block_tables.size(0) == context_lens.size(0),
              "paged_attention: block_tables [B, M], query_start [B+1], context_lens [B] expected");
}

// The layout of block_tables/query_start/context_lens read back and checked: the
// tensor overloads' way (the PagedBatch overload has it on the host already).
PagedLayout checked_layout(const torch::Tensor& q, const torch::Tensor& key_cache,
                           const torch::Tensor& block_tables, const torch::Tensor& query_start,
                           const torch::Tensor& context_lens) {
  PagedLayout layout = read_paged_layout(block_tables, query_start, context_lens);
  layout.check(key_cache.size(1), key_cache.size(0), q.size(0));
  return layout;
}

// Whether the fused CPU kernel (below) takes this call.
bool fused_cpu_applies(const torch::Tensor& q, const torch::Tensor& key_cache) {
  return q.device().is_cpu() && key_cache.device().is_cpu() &&
         q.scalar_type() == key_cache.scalar_type() &&
         (q.scalar_type() == torch::kFloat || q.scalar_type() == torch::kBFloat16 ||
          q.scalar_type() == torch::kDouble);
}

using StepLayout = PagedLayout;

template <typename T>
inline float as_float(T value) {
  return static_cast<float>(value);
}

// Positions scored per pass: their scores for every query head of a kv group are kept,
// so the softmax rescales the accumulators once per tile instead of once per position.
constexpr int64_t kTile = 32;

// Prefill and chunked-prefill rows (more than one new token) of sequences whose context
// reaches this many tokens go through torch's fused attention
// (sequence_attention_sdpa), whose vectorised kernel outruns the one below from there
// on; shorter ones stay in the one parallel pass, where many short rows cost less than
// one SDPA call each. A decode row (one new token) always stays in the pass below: it
// reads the cache in place, where SDPA would first gather the sequence's blocks (1 MB
// per layer at 512 tokens in bf16). Measured on the Qwen3-0.6B shape at 2 threads
// after a 512-token prompt: fp32 decode 6.78 -> 7.72 tokens/s, bf16 9.39 -> 8.98-9.93
// (three runs; docs/benchmark-history.md).
constexpr int64_t kSdpaMinContext = 128;

// q . k over `dim` floats with four independent partial sums: no single dependency
// chain, so the compiler keeps the multiply-adds in flight (and packs them into SIMD
// lanes) without reassociating one sum.
inline float dot_portable(const float* a, const float* b, int64_t dim) {
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
  int64_t d = 0;
  for (; d + 4 <= dim; d += 4) {
    s0 += a[d] * b[d];
    s1 += a[d + 1] * b[d + 1];
    s2 += a[d + 2] * b[d + 2];
    s3 += a[d + 3] * b[d + 3];
  }
  for (; d < dim; ++d) s0 += a[d] * b[d];
  return (s0 + s1) + (s2 + s3);
}

// The inner loops again with AVX-512, chosen at run time (the build has no -march, and
// the portable loops above compile to SSE2): a decode step scores and sums every cached
// row of every sequence, so these loops are the kernel.
__attribute__((target("avx512f"))) float dot_avx512(const float* a, const float* b,
                                                    int64_t dim) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int64_t d = 0;
  for (; d + 32 <= dim; d += 32) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + d), _mm512_loadu_ps(b + d), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + d + 16), _mm512_loadu_ps(b + d + 16), acc1);
  }
  for (; d + 16 <= dim; d += 16)
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + d), _mm512_loadu_ps(b + d), acc0);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, _mm512_add_ps(acc0, acc1));
  float sum = 0.0f;
  for (float lane : lanes) sum += lane;
  for (; d < dim; ++d) sum += a[d] * b[d];
  return sum;
}

// acc = acc * scale + weight * v.
__attribute__((target("avx512f"))) void scale_add_avx512(float* acc, float scale, float weight,
                                                         const float* v, int64_t dim) {
  const __m512 s = _mm512_set1_ps(scale), w = _mm512_set1_ps(weight);
  int64_t d = 0;
  for (; d + 16 <= dim; d += 16) {
    const __m512 a = _mm512_mul_ps(_mm512_loadu_ps(acc + d), s);
    _mm512_storeu_ps(acc + d, _mm512_fmadd_ps(w, _mm512_loadu_ps(v + d), a));
  }
  for (; d < dim; ++d) acc[d] = acc[d] * scale + weight * v[d];
}

// bf16 -> fp32 is a 16-bit shift: exact.
__attribute__((target("avx512f"))) void bf16_row_avx512(const c10::BFloat16* row, int64_t dim,
                                                        float* out) {
  int64_t d = 0;
  for (; d + 16 <= dim; d += 16) {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + d));
    // The zero-masked forms: GCC 12's unmasked ones read an undefined register, which
    // -Wmaybe-uninitialized reports in every caller.
    const __m512i widened = _mm512_maskz_cvtepu16_epi32(0xFFFF, bits);
    _mm512_storeu_ps(out + d, _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, widened, 16)));
  }
  for (; d < dim; ++d) out[d] = static_cast<float>(row[d]);
}

inline float dot(const float* a, const float* b, int64_t dim, bool avx512) {
  return avx512 ? dot_avx512(a, b, dim) : dot_portable(a, b, dim);
}

inline void scale_add(float* acc, float scale, float weight, const float* v, int64_t dim,
                      bool avx512) {
  if (avx512) return scale_add_avx512(acc, scale, weight, v, dim);
  for (int64_t d = 0; d < dim; ++d) acc[d] = acc[d] * scale + weight * v[d];
}

// A cache row as floats: the row itself when the cache is fp32, else converted into
// `scratch` (once per row and tile, shared by every query head of the group).
template <typename scalar_t>
inline const float* float_row(const scalar_t* row, int64_t dim, float* scratch, bool avx512) {
  if constexpr (std::is_same_v<scalar_t, float>) {
    return row;
  } else {
    if constexpr (std::is_same_v<scalar_t, c10::BFloat16>) {
      if (avx512) {
        bf16_row_avx512(row, dim, scratch);
        return scratch;
      }
    }
    for (int64_t d = 0; d < dim; ++d) scratch[d] = as_float(row[d]);
    return scratch;
  }
}

// The sum of a vector's 16 lanes, as a tree. The zero-masked extracts: GCC 12's unmasked
// ones (behind _mm512_castps512_ps256 and _mm512_reduce_add_ps) read an undefined
// register, which -Wmaybe-uninitialized reports.
__attribute__((target("avx512f"))) inline float horizontal_sum_avx512(__m512 x) {
  const __m512d bits = _mm512_castps_pd(x);
  const __m256 halves = _mm256_add_ps(_mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xF, bits, 0)),
                                      _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xF, bits, 1)));
  __m128 quarters = _mm_add_ps(_mm256_castps256_ps128(halves), _mm256_extractf128_ps(halves, 1));
  quarters = _mm_add_ps(quarters, _mm_movehl_ps(quarters, quarters));
  quarters = _mm_add_ss(quarters, _mm_shuffle_ps(quarters, quarters, 1));
  return _mm_cvtss_f32(quarters);
}

// One tile of positions for every query head of a kv group, with AVX-512 and the
// head dimension fixed at compile time (kVectors x 16 floats): the query and the
// accumulator stay in registers across the tile's rows, and the scores and the
// weighted sums inline, where the generic loop below makes two calls per row (with
// a 16-lane store and scalar sum for every score). Same online softmax, same
// accumulation order for the values; a score's 16 lanes are summed as a tree.
// Measured (+5-6% decode on bench rollout's model): docs/benchmarks.md, "The CPU tile
// of paged attention".
template <int kVectors>
__attribute__((target("avx512f"))) void attend_tile_avx512(const float* query, int64_t group,
                                                           const float* const* k_rows,
                                                           const float* const* v_rows, int64_t n,
                                                           float* running_max, float* running_sum,
                                                           float* accumulator, float* scores) {
  constexpr int64_t kDim = kVectors * 16;
  for (int64_t g = 0; g < group; ++g) {
    __m512 q[kVectors];
    for (int v = 0; v < kVectors; ++v) q[v] = _mm512_loadu_ps(query + g * kDim + v * 16);
    float* sg = scores + g * kTile;
    float tile_max = running_max[g];
    for (int64_t j = 0; j < n; ++j) {
      __m512 sum = _mm512_mul_ps(q[0], _mm512_loadu_ps(k_rows[j]));
      for (int v = 1; v < kVectors; ++v) {
        sum = _mm512_fmadd_ps(q[v], _mm512_loadu_ps(k_rows[j] + v * 16), sum);
      }
      sg[j] = horizontal_sum_avx512(sum);
      tile_max = std::max(tile_max, sg[j]);
    }
    float correction = 1.0f;
    if (tile_max > running_max[g]) {
      correction = std::exp(running_max[g] - tile_max);
      running_sum[g] *= correction;
      running_max[g] = tile_max;
    }
    float* acc_out = accumulator + g * kDim;
    __m512 acc[kVectors];
    const __m512 scale = _mm512_set1_ps(correction);
    for (int v = 0; v < kVectors; ++v)
      acc[v] = _mm512_mul_ps(_mm512_loadu_ps(acc_out + v * 16), scale);
    for (int64_t j = 0; j < n; ++j) {
      const float weight = std::exp(sg[j] - tile_max);
      running_sum[g] += weight;
      const __m512 w = _mm512_set1_ps(weight);
      for (int v = 0; v < kVectors; ++v) {
        acc[v] = _mm512_fmadd_ps(w, _mm512_loadu_ps(v_rows[j] + v * 16), acc[v]);
      }
    }
    for (int v = 0; v < kVectors; ++v) _mm512_storeu_ps(acc_out + v * 16, acc[v]);
  }
}

using TileFunction = void (*)(const float*, int64_t, const float* const*, const float* const*,
                              int64_t, float*, float*, float*, float*);

// The specialised tile for this head dimension, or null (the generic loop).
TileFunction tile_function(int64_t dim, bool avx512) {
  if (!avx512) return nullptr;
  switch (dim) {
    case 32:
      return attend_tile_avx512<2>;
    case 64:
      return attend_tile_avx512<4>;
    case 128:
      return attend_tile_avx512<8>;
    default:
      return nullptr;
  }
}

// Fused kernel. One work item is a (query token, kv head) pair: the `group` query heads
// that share the kv head stream over the sequence's cached positions together, tile by
// tile, each cache row read (and converted) once for all of them, with an online
// softmax in fp32.
template <typename scalar_t>
void paged_attention_cpu(const torch::Tensor& q, const torch::Tensor& key_cache,
                         const torch::Tensor& value_cache, const StepLayout& layout,
                         const std::vector<char>& done, double scale, torch::Tensor& out) {
  const int64_t heads = q.size(1);
  const int64_t dim = q.size(2);
  const int64_t block_size = key_cache.size(1);
  const int64_t kv_heads = key_cache.size(2);
  const int64_t group = heads / kv_heads;
  const int64_t total = q.size(0);
  const scalar_t* q_data = q.data_ptr<scalar_t>();
  const scalar_t* k_data = key_cache.data_ptr<scalar_t>();
  const scalar_t* v_data = value_cache.data_ptr<scalar_t>();
  scalar_t* out_data = out.data_ptr<scalar_t>();
  const int64_t token_stride = block_size == 0 ? 0 : kv_heads * dim;  // within a block
  const int64_t block_stride = block_size * token_stride;

  // Which sequence each query token belongs to, and the tokens of the sequences not
  // `done` already.
  std::vector<int64_t> sequence_of(total);
  std::vector<int64_t> tokens;
  for (size_t b = 0; b + 1 < layout.query_start.size(); ++b) {
    for (int64_t t = layout.query_start[b]; t < layout.query_start[b + 1]; ++t) {
      sequence_of[t] = b;
      if (!done[b]) tokens.push_back(t);
    }
  }

  const int64_t items = static_cast<int64_t>(tokens.size()) * kv_heads;
  const bool avx512 = cpu_has_avx512();
  const TileFunction tile = tile_function(dim, avx512);
  at::parallel_for(0, items, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> query(group * dim), accumulator(group * dim);
    std::vector<float> running_max(group), running_sum(group), scores(group * kTile);
    std::vector<float> k_scratch(kTile * dim), v_scratch(kTile * dim);
    std::vector<const float*> k_rows(kTile), v_rows(kTile);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t t = tokens[static_cast<size_t>(item / kv_heads)];
      const int64_t kv_head = item % kv_heads;
      const int64_t b = sequence_of[t];
      const int64_t new_tokens = layout.query_start[b + 1] - layout.query_start[b];
      const int64_t position = layout.context_lens[b] - new_tokens + (t - layout.query_start[b]);
      for (int64_t g = 0; g < group; ++g) {
        const scalar_t* q_row = q_data + (t * heads + kv_head * group + g) * dim;
        for (int64_t d = 0; d < dim; ++d) {
          query[g * dim + d] = as_float(q_row[d]) * static_cast<float>(scale);
        }
      }
      std::fill(accumulator.begin(), accumulator.end(), 0.0f);
      std::fill(running_max.begin(), running_max.end(), -std::numeric_limits<float>::infinity());
      std::fill(running_sum.begin(), running_sum.end(), 0.0f);
      const int64_t* table = layout.block_tables.data() + b * layout.max_blocks;
      for (int64_t first = 0; first <= position; first += kTile) {
        const int64_t n = std::min(kTile, position + 1 - first);
        for (int64_t j = 0; j < n; ++j) {
          const int64_t p = first + j;
          const int64_t offset = table[p / block_size] * block_stride +
                                 (p % block_size) * token_stride + kv_head * dim;
          k_rows[j] = float_row(k_data + offset, dim, k_scratch.data() + j * dim, avx512);
          v_rows[j] = float_row(v_data + offset, dim, v_scratch.data() + j * dim, avx512);
        }
        if (tile != nullptr) {
          tile(query.data(), group, k_rows.data(), v_rows.data(), n, running_max.data(),
               running_sum.data(), accumulator.data(), scores.data());
          continue;
        }
        for (int64_t g = 0; g < group; ++g) {
          const float* qg = query.data() + g * dim;
          float* sg = scores.data() + g * kTile;
          float tile_max = running_max[g];
          for (int64_t j = 0; j < n; ++j) {
            sg[j] = dot(qg, k_rows[j], dim, avx512);
            tile_max = std::max(tile_max, sg[j]);
          }
          float* acc = accumulator.data() + g * dim;
          // The first row's add also applies the tile's rescale of the accumulator.
          float correction = 1.0f;
          if (tile_max > running_max[g]) {
            correction = std::exp(running_max[g] - tile_max);
            running_sum[g] *= correction;
            running_max[g] = tile_max;
          }
          for (int64_t j = 0; j < n; ++j) {
            const float weight = std::exp(sg[j] - tile_max);
            running_sum[g] += weight;
            scale_add(acc, j == 0 ? correction : 1.0f, weight, v_rows[j], dim, avx512);
          }
        }
      }
      for (int64_t g = 0; g < group; ++g) {
        scalar_t* out_row = out_data + (t * heads + kv_head * group + g) * dim;
        const float* acc = accumulator.data() + g * dim;
        const float inv_sum = running_sum[g] > 0.0f ? 1.0f / running_sum[g] : 0.0f;
        for (int64_t d = 0; d < dim; ++d) out_row[d] = static_cast<scalar_t>(acc[d] * inv_sum);
      }
    }
  });
}

// One sequence through torch's fused attention (at::scaled_dot_product_attention: its
// CPU flash kernel is vectorised for the machine, fp32 accumulation, GQA without
// repeating k/v): the sequence's whole cache blocks are gathered into [K, C, D] and its
// n new tokens attend causally with their offset (token i sees positions
// <= C - n + i). Writes rows [begin, begin + n) of out.
void sequence_attention_sdpa(const torch::Tensor& q, const torch::Tensor& key_cache,
                             const torch::Tensor& value_cache, const StepLayout& layout,
                             int64_t b, double scale, torch::Tensor& out) {
  const int64_t begin = layout.query_start[b];
  const int64_t n = layout.query_start[b + 1] - begin;
  const int64_t context = layout.context_lens[b];
  const int64_t block_size = key_cache.size(1);
  const int64_t blocks = (context + block_size - 1) / block_size;
  const torch::Tensor block_ids =
      torch::from_blob(const_cast<int64_t*>(layout.block_tables.data()) + b * layout.max_blocks,
                       {blocks}, torch::kLong);
  auto gather = [&](const torch::Tensor& cache) {  // [N, S, K, D] -> [1, K, C, D]
    return cache.index_select(0, block_ids)
        .flatten(0, 1)
        .narrow(0, 0, context)
        .permute({1, 0, 2})
        .unsqueeze(0);
  };
  const torch::Tensor query = q.narrow(0, begin, n).transpose(0, 1).unsqueeze(0);  // [1, H, n, D]
  std::optional<torch::Tensor> mask;
  if (n > 1) {
    const torch::Tensor rows = torch::arange(n, torch::kLong).unsqueeze(1) + (context - n);
    mask = torch::arange(context, torch::kLong).unsqueeze(0) <= rows;  // [n, C]
  }
  const torch::Tensor attended = at::scaled_dot_product_attention(
      query, gather(key_cache), gather(value_cache), mask, 0.0, /*is_causal=*/false, scale,
      /*enable_gqa=*/true);
  out.narrow(0, begin, n).copy_(attended.squeeze(0).transpose(0, 1));
}

}  // namespace

void write_kv_cache(const torch::Tensor& k, const torch::Tensor& v, torch::Tensor& key_cache,
                    torch::Tensor& value_cache, const torch::Tensor& slot_mapping) {
  TORCH_CHECK(k.dim() == 3 && k.sizes() == v.sizes() && slot_mapping.size(0) == k.size(0),
              "write_kv_cache: k/v [T, K, D] and slot_mapping [T] expected");
  const int64_t slots = key_cache.size(0) * key_cache.size(1);
  const auto index = slot_mapping.to(key_cache.device(), torch::kLong);
  key_cache.view({slots, key_cache.size(2), key_cache.size(3)})
      .index_copy_(0, index, k.to(key_cache.scalar_type()));
  value_cache.view({slots, value_cache.size(2), value_cache.size(3)})
      .index_copy_(0, index, v.to(value_cache.scalar_type()));
}

namespace {

// The CPU path: long multi-token rows through torch's fused attention, one sequence at
// a time; the rest (decode rows, short contexts) through the fused kernel above, in one
// parallel pass.
torch::Tensor paged_attention_fused_cpu(const torch::Tensor& q, const torch::Tensor& key_cache,
                                        const torch::Tensor& value_cache,
                                        const StepLayout& layout, double scale) {
  const torch::Tensor q_contiguous = q.contiguous();
  const torch::Tensor k_contiguous = key_cache.contiguous();
  const torch::Tensor v_contiguous = value_cache.contiguous();
  torch::Tensor out = torch::empty_like(q_contiguous);
  std::vector<char> done(layout.context_lens.size(), 0);
  bool any_short = false;
  for (size_t b = 0; b < layout.context_lens.size(); ++b) {
    const int64_t n = layout.query_start[b + 1] - layout.query_start[b];
    if (n > 1 && layout.context_lens[b] >= kSdpaMinContext) {
      sequence_attention_sdpa(q_contiguous, k_contiguous, v_contiguous, layout,
                              static_cast<int64_t>(b), scale, out);
      done[b] = 1;
    } else {
      any_short = any_short || n > 0;
    }
  }
  if (!any_short) return out;
  AT_DISPATCH_FLOATING_TYPES_AND(at::ScalarType::BFloat16, q.scalar_type(), "paged_attention", [&] {
    paged_attention_cpu<scalar_t>(q_contiguous, k_contiguous, v_contiguous, layout, done, scale,
                                  out);
  });
  return out;
}

}  // namespace

torch::Tensor paged_attention(const torch::Tensor& q, const torch::Tensor& key_cache,
                              const torch::Tensor& value_cache, const torch::Tensor& block_tables,
                              const torch::Tensor& query_start, const torch::Tensor& context_lens,
                              double scale) {
  check_shapes(q, key_cache, value_cache, block_tables, query_start, context_lens);
  const PagedLayout layout = checked_layout(q, key_cache, block_tables, query_start, context_lens);
  if (fused_cpu_applies(q, key_cache)) {
    return paged_attention_fused_cpu(q, key_cache, value_cache, layout, scale);
  }
  PackedUpload upload;
  const std::vector<StagedPagedGroup> staged =
      stage_paged_groups(layout, key_cache.size(1), upload);
  upload.upload(q.device());
  return paged_attention_gathered(
      q, key_cache, value_cache,
      resolve_paged_groups(staged, upload, key_cache.scalar_type()), scale);
}

torch::Tensor paged_attention(const torch::Tensor& q, const torch::Tensor& key_cache,
                              const torch::Tensor& value_cache, const PagedBatch& batch,
                              double scale) {
  check_shapes(q, key_cache, value_cache, batch.block_tables, batch.query_start,
               batch.context_lens);
  TORCH_CHECK(batch.layout.sequences() == batch.context_lens.size(0) &&
                  batch.layout.query_start.back() == q.size(0),
              "paged_attention: the batch's host layout does not describe this step");
  // Prepared groups choose the gathered path even on the CPU (how it is tested there).
  if (batch.groups.empty() && fused_cpu_applies(q, key_cache)) {
    return paged_attention_fused_cpu(q, key_cache, value_cache, batch.layout, scale);
  }
  if (!batch.groups.empty() || batch.layout.query_start.back() == 0) {
    return paged_attention_gathered(q, key_cache, value_cache, batch.groups, scale);
  }
  // A batch built without groups: stage them here (one upload per layer).
  PackedUpload upload;
  const std::vector<StagedPagedGroup> staged =
      stage_paged_groups(batch.layout, key_cache.size(1), upload);
  upload.upload(q.device());
  return paged_attention_gathered(
      q, key_cache, value_cache,
      resolve_paged_groups(staged, upload, key_cache.scalar_type()), scale);
}

torch::Tensor paged_attention_reference(const torch::Tensor& q, const torch::Tensor& key_cache,
                                        const torch::Tensor& value_cache,
                                        const torch::Tensor& block_tables,
                                        const torch::Tensor& query_start,
                                        const torch::Tensor& context_lens, double scale) {
  check_shapes(q, key_cache, value_cache, block_tables, query_start, context_lens);
  const int64_t block_size = key_cache.size(1);
  const int64_t kv_heads = key_cache.size(2);
  const int64_t heads = q.size(1);
  const int64_t dim = q.size(2);
  const PagedLayout layout = checked_layout(q, key_cache, block_tables, query_start, context_lens);
  const torch::Tensor keys = key_cache.reshape({-1, kv_heads, dim});
  const torch::Tensor values = value_cache.reshape({-1, kv_heads, dim});
  torch::Tensor out = torch::empty_like(q);
  for (size_t b = 0; b < layout.context_lens.size(); ++b) {
    const int64_t begin = layout.query_start[b];
    const int64_t n = layout.query_start[b + 1] - begin;
    if (n == 0) continue;
    const int64_t context = layout.context_lens[b];
    std::vector<int64_t> slots(context);
    for (int64_t p = 0; p < context; ++p) {
      slots[p] =
          layout.block_tables[b * layout.max_blocks + p / block_size] * block_size + p % block_size;
    }
    const torch::Tensor slot_index = torch::tensor(slots, torch::kLong).to(q.device());
    // [C, K, D] -> [H, C, D] by repeating each kv head for its query heads.
    const torch::Tensor k = keys.index_select(0, slot_index)
                                .to(torch::kFloat)
                                .repeat_interleave(heads / kv_heads, 1)
                                .transpose(0, 1);
    const torch::Tensor v = values.index_select(0, slot_index)
                                .to(torch::kFloat)
                                .repeat_interleave(heads / kv_heads, 1)
                                .transpose(0, 1);
    const torch::Tensor query =
        q.narrow(0, begin, n).to(torch::kFloat).transpose(0, 1);             // [H, n, D]
    torch::Tensor scores = torch::matmul(query, k.transpose(1, 2)) * scale;  // [H, n, C]
    // Query i sits at position context - n + i and sees positions <= it.
    const torch::Tensor query_pos =
        torch::arange(context - n, context, q.options().dtype(torch::kLong));
    const torch::Tensor key_pos = torch::arange(context, q.options().dtype(torch::kLong));
    const torch::Tensor future = key_pos.unsqueeze(0) > query_pos.unsqueeze(1);  // [n, C]
    scores = scores.masked_fill(future, -std::numeric_limits<float>::infinity());
    const torch::Tensor attended = torch::matmul(torch::softmax(scores, -1), v);  // [H, n, D]
    out.narrow(0, begin, n).copy_(attended.transpose(0, 1));
  }
  return out;
}

}  // namespace aspen::kernels
