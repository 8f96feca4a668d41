#include "aspen/kernels/varlen_attention.h"

#include <limits>
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

// One sequence: q [L, H, D], k/v [L, K, D] -> [L, H, D].
torch::Tensor attend_one(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                         double scale) {
  const int64_t len = q.size(0);
  const int64_t heads = q.size(1);
  const int64_t kv_heads = k.size(1);
  const int64_t group = heads / kv_heads;
  const int64_t dim = q.size(2);
  // [L, K*G, D] -> [K, G*L, D]: the G query heads of one kv head share its keys.
  torch::Tensor qg = q.view({len, kv_heads, group, dim})
                         .permute({1, 2, 0, 3})
                         .reshape({kv_heads, group * len, dim});
  torch::Tensor kt = k.permute({1, 2, 0});  // [K, D, L]
  torch::Tensor vk = v.transpose(0, 1);     // [K, L, D]
  const auto acc = q.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  torch::Tensor scores = torch::matmul(qg, kt).to(acc) * scale;  // [K, G*L, L]
  torch::Tensor future = torch::ones({len, len}, q.options().dtype(torch::kBool)).triu(1);
  scores = scores.view({kv_heads, group, len, len})
               .masked_fill(future, -std::numeric_limits<double>::infinity());
  torch::Tensor probs =
      torch::softmax(scores, -1).to(q.scalar_type()).view({kv_heads, group * len, len});
  torch::Tensor out = torch::matmul(probs, vk);  // [K, G*L, D]
  return out.view({kv_heads, group, len, dim}).permute({2, 0, 1, 3}).reshape({len, heads, dim});
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
  std::vector<torch::Tensor> outputs;
  outputs.reserve(offsets.size());
  for (size_t b = 0; b + 1 < offsets.size(); ++b) {
    const int64_t begin = offsets[b];
    const int64_t len = offsets[b + 1] - begin;
    if (len == 0) continue;
    outputs.push_back(attend_one(q.narrow(0, begin, len), k.narrow(0, begin, len),
                                 v.narrow(0, begin, len), scale));
  }
  if (outputs.empty()) return torch::empty_like(q);
  return outputs.size() == 1 ? outputs[0] : torch::cat(outputs, 0);
}

}  // namespace aspen
