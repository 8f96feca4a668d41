#include "aspen/kernels/varlen_attention.h"

#include <map>
#include <vector>

namespace aspen {
namespace {

std::vector<int64_t> read_offsets(const torch::Tensor& cu_seqlens, int64_t total) {
  TORCH_CHECK(
      cu_seqlens.dim() == 1 && cu_seqlens.size(0) >= 1 && cu_seqlens.scalar_type() == torch::kLong,
      "varlen_causal_attention: cu_seqlens [B+1] int64 expected");
  torch::Tensor host = cu_seqlens.to(torch::kCPU).contiguous();
  std::vector<int64_t> offsets(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + host.numel());
  TORCH_CHECK(offsets.front() == 0 && offsets.back() == total,
              "varlen_causal_attention: cu_seqlens must start at 0 and end at T=", total);
  for (size_t i = 1; i < offsets.size(); ++i) {
    TORCH_CHECK(offsets[i] >= offsets[i - 1], "varlen_causal_attention: cu_seqlens decreases");
  }
  return offsets;
}

// N sequences of one length L: q [N, L, H, D], k/v [N, L, K, D] -> [N, L, H, D].
// torch's fused causal attention (flash attention on CPU and CUDA for fp32/bf16, the
// math kernel for fp64): softmax statistics in fp32 whatever the input dtype, no
// [L, L] score matrix kept for backward, and GQA without repeating the kv heads.
torch::Tensor attend_same_length(const torch::Tensor& q, const torch::Tensor& k,
                                 const torch::Tensor& v, double scale) {
  return at::scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                          /*attn_mask=*/std::nullopt, /*dropout_p=*/0.0,
                                          /*is_causal=*/true, scale, /*enable_gqa=*/true)
      .transpose(1, 2);
}

// Sequences of one dtype: those of equal length are attended as one batch.
torch::Tensor attend_packed(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const std::vector<int64_t>& offsets, double scale) {
  const int64_t heads = q.size(1), kv_heads = k.size(1), dim = q.size(2);
  // Sequences of equal length are attended as one batch: RL batches repeat a few
  // lengths many times (one prompt template, short answers), and one batched matmul
  // per length replaces a handful of small ops per sequence.
  std::map<int64_t, std::vector<int64_t>> by_length;  // length -> sequence indices
  for (size_t b = 0; b + 1 < offsets.size(); ++b) {
    const int64_t len = offsets[b + 1] - offsets[b];
    if (len > 0) by_length[len].push_back(static_cast<int64_t>(b));
  }
  if (by_length.empty()) return torch::empty_like(q);
  if (by_length.size() == 1) {  // one length: the packed tokens already are [N, L]
    const int64_t len = by_length.begin()->first;
    const int64_t n = static_cast<int64_t>(by_length.begin()->second.size());
    return attend_same_length(q.reshape({n, len, heads, dim}), k.reshape({n, len, kv_heads, dim}),
                              v.reshape({n, len, kv_heads, dim}), scale)
        .reshape({n * len, heads, dim});
  }
  std::vector<torch::Tensor> outputs;
  std::vector<int64_t> rows;  // packed token index of each output row, in output order
  rows.reserve(static_cast<size_t>(q.size(0)));
  for (const auto& [len, sequences] : by_length) {
    const int64_t n = static_cast<int64_t>(sequences.size());
    const size_t first = rows.size();
    for (int64_t b : sequences) {
      for (int64_t t = offsets[b]; t < offsets[b] + len; ++t) rows.push_back(t);
    }
    const torch::Tensor index =
        torch::tensor(std::vector<int64_t>(rows.begin() + static_cast<std::ptrdiff_t>(first),
                                           rows.end()),
                      torch::kLong)
            .to(q.device());
    outputs.push_back(attend_same_length(q.index_select(0, index).reshape({n, len, heads, dim}),
                                         k.index_select(0, index).reshape({n, len, kv_heads, dim}),
                                         v.index_select(0, index).reshape({n, len, kv_heads, dim}),
                                         scale)
                          .reshape({n * len, heads, dim}));
  }
  // Back to packed order: output row r holds token rows[r].
  std::vector<int64_t> inverse(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) inverse[static_cast<size_t>(rows[r])] = static_cast<int64_t>(r);
  return torch::cat(outputs, 0).index_select(0, torch::tensor(inverse, torch::kLong).to(q.device()));
}

// torch's CPU flash attention runs fp32 inputs about twice as fast as bf16 ones,
// forward and backward together (measured on [1, 8, 213, 64] with 4 kv heads, 2
// threads: 4.8 against 10.8 ms), because its reduced-precision path converts every
// block to fp32 inside its loops. Its softmax statistics are fp32 either way, so
// attending in fp32 and rounding the output once is also at least as accurate.
bool attend_in_fp32(const torch::Tensor& q) {
  const auto dtype = q.scalar_type();
  return q.device().is_cpu() && (dtype == torch::kBFloat16 || dtype == torch::kHalf);
}

}  // namespace

torch::Tensor varlen_causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                                      const torch::Tensor& v, const torch::Tensor& cu_seqlens,
                                      double scale) {
  TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && v.sizes() == k.sizes() && q.size(0) == k.size(0) &&
                  q.size(2) == k.size(2) && k.size(1) > 0 && q.size(1) % k.size(1) == 0,
              "varlen_causal_attention: q [T, H, D], k/v [T, K, D] with H % K == 0 expected, got ",
              q.sizes(), " ", k.sizes(), " ", v.sizes());
  const std::vector<int64_t> offsets = read_offsets(cu_seqlens, q.size(0));
  if (!attend_in_fp32(q)) return attend_packed(q, k, v, offsets, scale);
  return attend_packed(q.to(torch::kFloat), k.to(torch::kFloat), v.to(torch::kFloat), offsets,
                       scale)
      .to(q.scalar_type());
}

}  // namespace aspen
