#include "aspen/kernels/paged_layout.h"

#include <algorithm>
#include <limits>
#include <map>

#include "aspen/kernels/imports.h"

namespace aspen::kernels {
namespace {

std::vector<int64_t> host_int64(const torch::Tensor& t) {
  const torch::Tensor host = t.to(torch::kCPU, torch::kLong).contiguous();
  return std::vector<int64_t>(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + host.numel());
}

// The group of a sequence with n new tokens: 1 for decode rows, else n rounded up to a
// power of two (padding at most doubles a group's queries).
int64_t group_key(int64_t n) {
  int64_t key = 1;
  while (key < n) key *= 2;
  return key;
}

}  // namespace

void PagedLayout::check(int64_t block_size, int64_t num_blocks, int64_t total_tokens) const {
  TORCH_CHECK(query_start.size() == context_lens.size() + 1 &&
                  static_cast<int64_t>(block_tables.size()) == sequences() * max_blocks,
              "paged layout: query_start [B+1], context_lens [B], block_tables [B * M] expected");
  TORCH_CHECK(query_start.front() == 0 && query_start.back() == total_tokens,
              "paged_attention: query_start must run from 0 to T");
  for (int64_t b = 0; b < sequences(); ++b) {
    const int64_t new_tokens = query_start[b + 1] - query_start[b];
    const int64_t context = context_lens[b];
    TORCH_CHECK(new_tokens >= 0 && context >= new_tokens && context <= max_blocks * block_size,
                "paged_attention: inconsistent context length for sequence ", b);
    for (int64_t j = 0; j < (context + block_size - 1) / block_size; ++j) {
      const int64_t block = block_tables[b * max_blocks + j];
      TORCH_CHECK(block >= 0 && block < num_blocks, "paged_attention: sequence ", b,
                  " uses cache block ", block, ", outside [0, ", num_blocks, ")");
    }
  }
}

PagedLayout read_paged_layout(const torch::Tensor& block_tables, const torch::Tensor& query_start,
                              const torch::Tensor& context_lens) {
  return {host_int64(query_start), host_int64(context_lens), host_int64(block_tables),
          block_tables.size(1)};
}

torch::Tensor paged_attention_mask(const torch::Tensor& query_positions, int64_t context,
                                   torch::ScalarType dtype) {
  TORCH_CHECK(query_positions.dim() == 3 && query_positions.size(2) == 1,
              "paged_attention_mask: query_positions [G, n, 1] expected");
  const int64_t aligned = (context + 15) / 16 * 16;
  const torch::Tensor hidden =
      torch::arange(aligned, query_positions.options()).view({1, 1, aligned}) > query_positions;
  return torch::zeros(hidden.sizes(), query_positions.options().dtype(dtype))
      .masked_fill_(hidden, -std::numeric_limits<double>::infinity())
      .narrow(2, 0, context);
}

std::vector<StagedPagedGroup> stage_paged_groups(const PagedLayout& layout, int64_t block_size,
                                                 PackedUpload& upload) {
  std::map<int64_t, std::vector<int64_t>> members_by_key;  // ordered: decode rows first
  for (int64_t b = 0; b < layout.sequences(); ++b) {
    const int64_t n = layout.query_start[b + 1] - layout.query_start[b];
    if (n > 0) members_by_key[group_key(n)].push_back(b);
  }
  const int64_t total_tokens = layout.query_start.back();
  std::vector<StagedPagedGroup> staged;
  for (const auto& [key, members] : members_by_key) {
    StagedPagedGroup group;
    group.members = static_cast<int64_t>(members.size());
    for (int64_t b : members) {
      group.rows = std::max(group.rows, layout.query_start[b + 1] - layout.query_start[b]);
      group.context = std::max(group.context, layout.context_lens[b]);
    }
    const int64_t n = group.rows, context = group.context;
    std::vector<int64_t> query_rows, tokens, padded, slots, query_positions;
    for (size_t g = 0; g < members.size(); ++g) {
      const int64_t b = members[g];
      const int64_t begin = layout.query_start[b];
      const int64_t new_tokens = layout.query_start[b + 1] - begin;
      const int64_t first_position = layout.context_lens[b] - new_tokens;
      for (int64_t i = 0; i < n; ++i) {
        const bool real = i < new_tokens;
        query_rows.push_back(real ? begin + i : begin);
        // A padding query sees key 0 only: a row with no visible key would be NaN.
        query_positions.push_back(real ? first_position + i : 0);
        if (real) {
          tokens.push_back(begin + i);
          padded.push_back(static_cast<int64_t>(g) * n + i);
        }
      }
      const int64_t* table = layout.block_tables.data() + b * layout.max_blocks;
      for (int64_t p = 0; p < context; ++p) {
        const int64_t q = std::min(p, layout.context_lens[b] - 1);
        slots.push_back(table[q / block_size] * block_size + q % block_size);
      }
    }
    group.whole_step = members_by_key.size() == 1 && n == 1 &&
                       static_cast<int64_t>(tokens.size()) == total_tokens;
    for (size_t t = 0; group.whole_step && t < tokens.size(); ++t) {
      group.whole_step = tokens[t] == static_cast<int64_t>(t);
    }
    group.query_rows = upload.add(query_rows);
    group.tokens = upload.add(tokens);
    group.padded = upload.add(padded);
    group.slots = upload.add(slots);
    group.query_positions = upload.add(query_positions, {group.members, n, 1});
    staged.push_back(group);
  }
  return staged;
}

std::vector<PagedGroup> resolve_paged_groups(const std::vector<StagedPagedGroup>& staged,
                                             const PackedUpload& upload, torch::ScalarType dtype) {
  std::vector<PagedGroup> groups;
  for (const StagedPagedGroup& s : staged) {
    PagedGroup group;
    group.members = s.members;
    group.rows = s.rows;
    group.context = s.context;
    group.whole_step = s.whole_step;
    group.query_rows = upload.part(s.query_rows);
    group.tokens = upload.part(s.tokens);
    group.padded = upload.part(s.padded);
    group.slots = upload.part(s.slots);
    const torch::Tensor query_positions = upload.part(s.query_positions);
    group.mask = paged_attention_mask(query_positions, s.context, dtype);
    groups.push_back(std::move(group));
  }
  return groups;
}

}  // namespace aspen::kernels
