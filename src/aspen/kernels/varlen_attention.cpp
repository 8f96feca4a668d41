#include "aspen/kernels/varlen_attention.h"

#include <limits>
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
torch::Tensor attend_same_length(const torch::Tensor& q, const torch::Tensor& k,
                                 const torch::Tensor& v, double scale) {
  const int64_t n = q.size(0);
  const int64_t len = q.size(1);
  const int64_t heads = q.size(2);
  const int64_t kv_heads = k.size(2);
  const int64_t group = heads / kv_heads;
  const int64_t dim = q.size(3);
  // [N, L, K*G, D] -> [N, K, G*L, D]: the G query heads of one kv head share its keys.
  torch::Tensor qg = q.reshape({n, len, kv_heads, group, dim})
                         .permute({0, 2, 3, 1, 4})
                         .reshape({n, kv_heads, group * len, dim});
  torch::Tensor kt = k.permute({0, 2, 3, 1});  // [N, K, D, L]
  torch::Tensor vk = v.transpose(1, 2);        // [N, K, L, D]
  const auto acc = q.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  torch::Tensor scores = torch::matmul(qg, kt).to(acc) * scale;  // [N, K, G*L, L]
  torch::Tensor future = torch::ones({len, len}, q.options().dtype(torch::kBool)).triu(1);
  scores = scores.reshape({n, kv_heads, group, len, len})
               .masked_fill(future, -std::numeric_limits<double>::infinity());
  torch::Tensor probs =
      torch::softmax(scores, -1).to(q.scalar_type()).reshape({n, kv_heads, group * len, len});
  torch::Tensor out = torch::matmul(probs, vk);  // [N, K, G*L, D]
  return out.reshape({n, kv_heads, group, len, dim})
      .permute({0, 3, 1, 2, 4})
      .reshape({n, len, heads, dim});
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

}  // namespace aspen
