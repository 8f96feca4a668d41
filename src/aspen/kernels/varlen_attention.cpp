#include "aspen/kernels/varlen_attention.h"

#include <map>
#include <vector>

#include "aspen/kernels/imports.h"

namespace aspen::kernels {
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
//
// RL batches repeat a few lengths many times (one prompt template, short answers), and
// one batched call per length replaces a handful of small ops per sequence. The tokens
// are put in group order once (one index_select of q, k and v, skipped when the groups
// already are consecutive runs, as with all-distinct or all-equal lengths), and the
// groups are split off as views. Per-group index_selects cost a zero-filled
// full-size gradient per group and per tensor in the backward: on the 0.6B bench
// update, 8 groups made that 0.8 s of zero-filling q-shaped tensors alone.
torch::Tensor attend_packed(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const std::vector<int64_t>& offsets, double scale) {
  const int64_t heads = q.size(1), kv_heads = k.size(1), dim = q.size(2);
  // Groups in the order of their first sequence: (length, sequence indices).
  std::vector<std::pair<int64_t, std::vector<int64_t>>> groups;
  std::map<int64_t, size_t> group_of_length;
  for (size_t b = 0; b + 1 < offsets.size(); ++b) {
    const int64_t len = offsets[b + 1] - offsets[b];
    if (len == 0) continue;
    const auto [it, added] = group_of_length.emplace(len, groups.size());
    if (added) groups.push_back({len, {}});
    groups[it->second].second.push_back(static_cast<int64_t>(b));
  }
  if (groups.empty()) return torch::empty_like(q);
  std::vector<int64_t> rows;  // packed token index of each grouped row
  rows.reserve(static_cast<size_t>(q.size(0)));
  std::vector<int64_t> group_tokens;
  for (const auto& [len, sequences] : groups) {
    for (int64_t b : sequences) {
      for (int64_t t = offsets[b]; t < offsets[b] + len; ++t) rows.push_back(t);
    }
    group_tokens.push_back(len * static_cast<int64_t>(sequences.size()));
  }
  bool in_order = true;
  for (size_t r = 0; r < rows.size() && in_order; ++r)
    in_order = rows[r] == static_cast<int64_t>(r);
  const torch::Tensor index =
      in_order ? torch::Tensor() : torch::tensor(rows, torch::kLong).to(q.device());
  const auto grouped = [&](const torch::Tensor& x) {
    return (in_order ? x : x.index_select(0, index)).split_with_sizes(group_tokens, 0);
  };
  const std::vector<torch::Tensor> qs = grouped(q), ks = grouped(k), vs = grouped(v);
  std::vector<torch::Tensor> outputs;
  for (size_t g = 0; g < groups.size(); ++g) {
    const int64_t len = groups[g].first;
    const int64_t n = static_cast<int64_t>(groups[g].second.size());
    outputs.push_back(attend_same_length(qs[g].reshape({n, len, heads, dim}),
                                         ks[g].reshape({n, len, kv_heads, dim}),
                                         vs[g].reshape({n, len, kv_heads, dim}), scale)
                          .reshape({n * len, heads, dim}));
  }
  const torch::Tensor out = outputs.size() == 1 ? outputs[0] : torch::cat(outputs, 0);
  if (in_order) return out;
  // Back to packed order: grouped row r holds token rows[r].
  std::vector<int64_t> inverse(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    inverse[static_cast<size_t>(rows[r])] = static_cast<int64_t>(r);
  }
  return out.index_select(0, torch::tensor(inverse, torch::kLong).to(q.device()));
}

// torch's CPU flash attention runs fp32 inputs 1.6-2.2x as fast as bf16 ones,
// forward and backward together (measured on [1, 8, 213, 64] with 4 kv heads, 2
// threads: 4.8 against 10.8 ms, and 4.7 against 7.5 ms in a rerun with
// tools/cpu_op_variants.py attention), because its reduced-precision path converts every
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

}  // namespace aspen::kernels
