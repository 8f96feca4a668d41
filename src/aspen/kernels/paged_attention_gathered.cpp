// paged_attention_gathered (declared in paged_attention.h): the composed-op paged
// attention for devices without a fused kernel. Per group of the step: two gathers
// through the block tables (one for MLA's shared latent), one SDPA, and for steps
// that are not a pure decode a gather of q and a scatter of the output; the launch
// count per layer depends on the number of groups, never on B.
#include <ATen/ATen.h>

#include "aspen/kernels/imports.h"
#include "aspen/kernels/paged_attention.h"

namespace aspen::kernels {
namespace {

// [N, S, K, D] cache -> [G, K, C, D] keys (or values) of the group's members.
torch::Tensor gather_group(const torch::Tensor& cache, const PagedGroup& group) {
  const int64_t kv_heads = cache.size(2), dim = cache.size(3);
  return cache.reshape({-1, kv_heads, dim})
      .index_select(0, group.slots)
      .view({group.members, group.context, kv_heads, dim})
      .permute({0, 2, 1, 3});
}

// Attention of one group: [G * n, H, D] padded queries -> [G * n, H, D].
torch::Tensor attend_group(const torch::Tensor& queries, const torch::Tensor& key_cache,
                           const torch::Tensor& value_cache, const PagedGroup& group,
                           double scale) {
  const int64_t members = group.members, n = group.rows;
  const int64_t heads = queries.size(1), dim = queries.size(2);
  const int64_t kv_heads = key_cache.size(2), per_kv = heads / kv_heads;
  const torch::Tensor keys = gather_group(key_cache, group);
  const torch::Tensor values =
      value_cache.is_same(key_cache) ? keys : gather_group(value_cache, group);
  if (n == 1) {
    // Decode: the H/K query heads of a kv head are that head's query rows, so plain
    // multi-head attention over K heads is GQA without repeating k/v; one mask row
    // (the member's context) serves them all.
    const torch::Tensor q = queries.view({members, kv_heads, per_kv, dim});
    const torch::Tensor mask = group.mask.unsqueeze(1);  // [G, 1, 1, C]
    return at::scaled_dot_product_attention(q, keys, values, mask, 0.0, false, scale)
        .reshape({members, heads, dim});
  }
  const torch::Tensor q = queries.view({members, n, heads, dim}).transpose(1, 2);  // [G, H, n, D]
  const torch::Tensor mask = group.mask.unsqueeze(1);                              // [G, 1, n, C]
  return at::scaled_dot_product_attention(q, keys, values, mask, 0.0, false, scale,
                                          /*enable_gqa=*/true)
      .transpose(1, 2)
      .reshape({members * n, heads, dim});
}

}  // namespace

torch::Tensor paged_attention_gathered(const torch::Tensor& q, const torch::Tensor& key_cache,
                                       const torch::Tensor& value_cache,
                                       const std::vector<PagedGroup>& groups, double scale) {
  TORCH_CHECK(q.dim() == 3 && key_cache.dim() == 4 && key_cache.sizes() == value_cache.sizes() &&
                  q.size(2) == key_cache.size(3) && q.size(1) % key_cache.size(2) == 0,
              "paged_attention_gathered: q [T, H, D], caches [N, S, K, D], H a multiple of K "
              "expected");
  // SDPA takes one dtype: q in the cache's, the result back in q's.
  const torch::Tensor queries = q.to(key_cache.scalar_type());
  if (groups.size() == 1 && groups.front().whole_step) {
    return attend_group(queries, key_cache, value_cache, groups.front(), scale)
        .to(q.scalar_type());
  }
  torch::Tensor out = torch::empty_like(queries);
  for (const PagedGroup& group : groups) {
    const torch::Tensor attended = attend_group(queries.index_select(0, group.query_rows),
                                                key_cache, value_cache, group, scale);
    out.index_copy_(0, group.tokens,
                    group.rows == 1 ? attended : attended.index_select(0, group.padded));
  }
  return out.to(q.scalar_type());
}

}  // namespace aspen::kernels
