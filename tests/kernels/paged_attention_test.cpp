#include "aspen/kernels/paged_attention.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "aspen/kernels/varlen_attention.h"

namespace aspen::kernels {
namespace {

constexpr int64_t kHeads = 4, kKvHeads = 2, kDim = 8, kBlockSize = 4;

// Sequences of the given lengths, their k/v scattered into shuffled cache blocks.
struct PagedFixture {
  std::vector<int64_t> lengths;
  torch::Tensor q, k, v;  // [T, H, D], [T, K, D] packed, contiguous
  torch::Tensor key_cache, value_cache, block_tables;
  std::vector<std::vector<int64_t>> slots;  // per sequence, per position

  PagedFixture(std::vector<int64_t> lens, torch::ScalarType dtype) : lengths(std::move(lens)) {
    torch::manual_seed(3);
    const int64_t total = std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
    q = torch::randn({total, kHeads, kDim}).to(dtype);
    k = torch::randn({total, kKvHeads, kDim}).to(dtype);
    v = torch::randn({total, kKvHeads, kDim}).to(dtype);
    // Enough blocks for every sequence and 8 to spare, shuffled.
    int64_t max_blocks = 1, needed = 0;
    for (int64_t len : lengths) {
      max_blocks = std::max(max_blocks, (len + kBlockSize - 1) / kBlockSize);
      needed += (len + kBlockSize - 1) / kBlockSize;
    }
    const int64_t blocks = needed + 8;
    key_cache = torch::zeros({blocks, kBlockSize, kKvHeads, kDim}, dtype);
    value_cache = torch::zeros_like(key_cache);
    std::vector<int64_t> free_blocks(blocks);
    std::iota(free_blocks.begin(), free_blocks.end(), 0);
    std::shuffle(free_blocks.begin(), free_blocks.end(), std::mt19937(7));
    block_tables = torch::zeros({static_cast<int64_t>(lengths.size()), max_blocks}, torch::kInt32);
    size_t next_free = 0;
    for (size_t b = 0; b < lengths.size(); ++b) {
      std::vector<int64_t> seq_slots;
      for (int64_t p = 0; p < lengths[b]; ++p) {
        if (p % kBlockSize == 0) block_tables[b][p / kBlockSize] = free_blocks[next_free++];
        seq_slots.push_back(block_tables[b][p / kBlockSize].item<int64_t>() * kBlockSize +
                            p % kBlockSize);
      }
      slots.push_back(seq_slots);
    }
    std::vector<int64_t> all_slots;
    for (const auto& s : slots) all_slots.insert(all_slots.end(), s.begin(), s.end());
    write_kv_cache(k, v, key_cache, value_cache, torch::tensor(all_slots, torch::kLong));
  }

  torch::Tensor cu_seqlens() const {
    std::vector<int64_t> offsets{0};
    for (int64_t len : lengths) offsets.push_back(offsets.back() + len);
    return torch::tensor(offsets, torch::kLong);
  }
};

// The last new_tokens[b] tokens of each sequence as this step's queries (their history
// cached), with the rows of `full` (attention over whole sequences) they must equal.
struct StepQueries {
  torch::Tensor q, query_start, expected;
};
StepQueries last_tokens(const PagedFixture& f, const torch::Tensor& full,
                        const std::vector<int64_t>& new_tokens) {
  std::vector<torch::Tensor> queries, expected;
  std::vector<int64_t> query_start{0};
  int64_t offset = 0;
  for (size_t b = 0; b < f.lengths.size(); ++b) {
    const int64_t first = offset + f.lengths[b] - new_tokens[b];
    queries.push_back(f.q.narrow(0, first, new_tokens[b]));
    expected.push_back(full.narrow(0, first, new_tokens[b]));
    query_start.push_back(query_start.back() + new_tokens[b]);
    offset += f.lengths[b];
  }
  return {torch::cat(queries), torch::tensor(query_start, torch::kLong), torch::cat(expected)};
}

TEST(PagedAttention, FullPrefillEqualsVarlenCausalAttention) {
  PagedFixture f({5, 1, 11, 8}, torch::kFloat);
  const double scale = 1.0 / std::sqrt(static_cast<double>(kDim));
  const torch::Tensor expected = varlen_causal_attention(f.q, f.k, f.v, f.cu_seqlens(), scale);
  const torch::Tensor lens = torch::tensor(f.lengths, torch::kLong);
  const torch::Tensor fused =
      paged_attention(f.q, f.key_cache, f.value_cache, f.block_tables, f.cu_seqlens(), lens, scale);
  const torch::Tensor reference = paged_attention_reference(
      f.q, f.key_cache, f.value_cache, f.block_tables, f.cu_seqlens(), lens, scale);
  EXPECT_LT((fused - expected).abs().max().item<double>(), 1e-5);
  EXPECT_LT((reference - expected).abs().max().item<double>(), 1e-5);
}

TEST(PagedAttention, DecodeAndChunkedPrefillSeeTheWholeHistory) {
  // Queries are only the last `n` tokens of each sequence; their history is cached.
  PagedFixture f({6, 9, 3}, torch::kFloat);
  const double scale = 0.3;
  const torch::Tensor full = varlen_causal_attention(f.q, f.k, f.v, f.cu_seqlens(), scale);
  const StepQueries step = last_tokens(f, full, {1, 4, 3});  // decode, chunk, whole prompt
  const torch::Tensor& q = step.q;
  const torch::Tensor lens = torch::tensor(f.lengths, torch::kLong);
  const torch::Tensor& starts = step.query_start;
  const torch::Tensor fused =
      paged_attention(q, f.key_cache, f.value_cache, f.block_tables, starts, lens, scale);
  const torch::Tensor reference =
      paged_attention_reference(q, f.key_cache, f.value_cache, f.block_tables, starts, lens, scale);
  EXPECT_LT((fused - step.expected).abs().max().item<double>(), 1e-5);
  EXPECT_LT((reference - step.expected).abs().max().item<double>(), 1e-5);
}

// Long contexts (128 tokens and more) take torch's fused attention one sequence at a
// time, short ones the fused kernel, in one call: a decode row and a chunk with long
// histories beside a short prompt, in fp32 and bf16.
TEST(PagedAttention, LongContextsThroughTorchAttentionBesideShortOnes) {
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    PagedFixture f({200, 5, 150}, dtype);
    const double scale = 0.3;
    const torch::Tensor full = varlen_causal_attention(
        f.q.to(torch::kFloat), f.k.to(torch::kFloat), f.v.to(torch::kFloat), f.cu_seqlens(), scale);
    const StepQueries step = last_tokens(f, full, {1, 5, 40});  // decode, prompt, chunk
    const torch::Tensor fused =
        paged_attention(step.q, f.key_cache, f.value_cache, f.block_tables, step.query_start,
                        torch::tensor(f.lengths, torch::kLong), scale);
    // bf16: the inputs are the same bf16 values; the output is rounded to bf16 (2^-8).
    const double tolerance = dtype == torch::kFloat ? 1e-5 : 1e-2;
    EXPECT_LT((fused.to(torch::kFloat) - step.expected).abs().max().item<double>(), tolerance)
        << dtype;
  }
}

TEST(PagedAttention, Bf16FusedMatchesFp32Reference) {
  PagedFixture f({7, 12}, torch::kBFloat16);
  const torch::Tensor lens = torch::tensor(f.lengths, torch::kLong);
  const torch::Tensor fused =
      paged_attention(f.q, f.key_cache, f.value_cache, f.block_tables, f.cu_seqlens(), lens, 0.35);
  const torch::Tensor reference = paged_attention_reference(
      f.q.to(torch::kFloat), f.key_cache.to(torch::kFloat), f.value_cache.to(torch::kFloat),
      f.block_tables, f.cu_seqlens(), lens, 0.35);
  EXPECT_LT((fused.to(torch::kFloat) - reference).abs().max().item<double>(), 3e-2);
}

}  // namespace
}  // namespace aspen::kernels
