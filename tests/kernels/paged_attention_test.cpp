#include "aspen/kernels/paged_attention.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "aspen/kernels/packed_upload.h"
#include "aspen/kernels/paged_layout.h"
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

// The gathered (composed-op, device) path's groups for a step, built the way the
// rollout runner builds them: staged into one upload, resolved after it.
std::vector<PagedGroup> groups_for(const PagedFixture& f, const torch::Tensor& query_start,
                                   int64_t block_size = kBlockSize) {
  const PagedLayout layout =
      read_paged_layout(f.block_tables, query_start, torch::tensor(f.lengths, torch::kLong));
  PackedUpload upload;
  const auto staged = stage_paged_groups(layout, block_size, upload);
  upload.upload(torch::kCPU);
  return resolve_paged_groups(staged, upload, f.key_cache.scalar_type());
}

// A mixed step: decode rows, a chunk and a whole prompt in different power-of-two
// buckets (1; 3 and 4 -> 4; 5 -> 8), GQA 4/2, against the reference and the full
// attention, in fp32 and bf16.
TEST(PagedAttentionGathered, MixedStepEqualsTheReference) {
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    PagedFixture f({6, 9, 3, 12, 1, 20}, dtype);
    const double scale = 0.3;
    const torch::Tensor full = varlen_causal_attention(
        f.q.to(torch::kFloat), f.k.to(torch::kFloat), f.v.to(torch::kFloat), f.cu_seqlens(), scale);
    const StepQueries step = last_tokens(f, full, {1, 4, 3, 1, 1, 5});
    const std::vector<PagedGroup> groups = groups_for(f, step.query_start);
    ASSERT_EQ(groups.size(), 3u);
    EXPECT_FALSE(groups[0].whole_step);
    const torch::Tensor gathered =
        paged_attention_gathered(step.q, f.key_cache, f.value_cache, groups, scale);
    const torch::Tensor reference = paged_attention_reference(
        step.q, f.key_cache, f.value_cache, f.block_tables, step.query_start,
        torch::tensor(f.lengths, torch::kLong), scale);
    const double tolerance = dtype == torch::kFloat ? 1e-5 : 1e-2;
    EXPECT_EQ(gathered.scalar_type(), dtype);
    EXPECT_LT((gathered.to(torch::kFloat) - step.expected).abs().max().item<double>(), tolerance)
        << dtype;
    EXPECT_LT((gathered.to(torch::kFloat) - reference.to(torch::kFloat)).abs().max().item<double>(),
              tolerance)
        << dtype;
  }
}

// A pure decode step is one group that answers every row in order: no gather of q, no
// scatter of the output. Contexts of different lengths share it (keys padded and masked).
TEST(PagedAttentionGathered, PureDecodeStepIsOneWholeStepGroup) {
  PagedFixture f({7, 1, 13, 4}, torch::kFloat);
  const torch::Tensor full = varlen_causal_attention(f.q, f.k, f.v, f.cu_seqlens(), 0.35);
  const StepQueries step = last_tokens(f, full, {1, 1, 1, 1});
  const std::vector<PagedGroup> groups = groups_for(f, step.query_start);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_TRUE(groups[0].whole_step);
  EXPECT_EQ(groups[0].context, 13);
  const torch::Tensor gathered =
      paged_attention_gathered(step.q, f.key_cache, f.value_cache, groups, 0.35);
  EXPECT_LT((gathered - step.expected).abs().max().item<double>(), 1e-5);
}

// MLA: one latent cache serves as keys and values (gathered once) with one kv head for
// every query head.
TEST(PagedAttentionGathered, SharedSingleHeadCacheEqualsTheReference) {
  PagedFixture f({5, 10, 2}, torch::kFloat);
  const torch::Tensor latent = f.key_cache.narrow(2, 0, 1).contiguous();  // [N, S, 1, D]
  const torch::Tensor lens = torch::tensor(f.lengths, torch::kLong);
  const torch::Tensor starts =
      torch::tensor(std::vector<int64_t>{0, 1, 4, 6}, torch::kLong);  // decode, chunk, prompt
  const torch::Tensor q = torch::randn({6, kHeads, kDim});
  const torch::Tensor gathered =
      paged_attention_gathered(q, latent, latent, groups_for(f, starts), 0.4);
  const torch::Tensor reference =
      paged_attention_reference(q, latent, latent, f.block_tables, starts, lens, 0.4);
  EXPECT_LT((gathered - reference).abs().max().item<double>(), 1e-5);
}

// The PagedBatch overload takes the layout from the batch's host copy: on the CPU it is
// the fused kernel's result, and a layout that does not describe the step is refused.
// The CPU kernel's specialised tiles (head dims 32, 64 and 128 on an AVX-512 machine,
// such as this project's CI) and its generic loop (48) against the reference: decode
// rows over contexts that cross several 32-position tiles, and a short prompt chunk, in
// a shuffled cache with GQA 4/2, in fp32 and bf16. The keys are scaled up so that a
// later tile's maximum beats an earlier one's (the online softmax's rescale).
TEST(PagedAttention, SpecialisedHeadDimensionsEqualTheReference) {
  const std::vector<int64_t> contexts = {1, 33, 70, 100};
  const std::vector<int64_t> new_tokens = {1, 1, 1, 6};
  for (const int64_t dim : {32, 48, 64, 128}) {
    for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
      torch::manual_seed(static_cast<uint64_t>(dim));
      const int64_t block_size = 16, blocks = 40;
      const torch::Tensor key_cache =
          (torch::randn({blocks, block_size, kKvHeads, dim}) * 3).to(dtype);
      const torch::Tensor value_cache = torch::randn({blocks, block_size, kKvHeads, dim}).to(dtype);
      std::vector<int64_t> order(blocks);
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), std::mt19937(11));
      const int64_t max_blocks = 7;
      torch::Tensor block_tables = torch::zeros({4, max_blocks}, torch::kInt32);
      for (int64_t b = 0, next = 0; b < 4; ++b) {
        for (int64_t m = 0; m < max_blocks; ++m) block_tables[b][m] = order[next++];
      }
      std::vector<int64_t> starts = {0};
      for (int64_t n : new_tokens) starts.push_back(starts.back() + n);
      const torch::Tensor q = torch::randn({starts.back(), kHeads, dim}).to(dtype);
      const torch::Tensor query_start = torch::tensor(starts, torch::kLong);
      const torch::Tensor lens = torch::tensor(contexts, torch::kLong);
      const double scale = 1.0 / std::sqrt(static_cast<double>(dim));
      const torch::Tensor fused =
          paged_attention(q, key_cache, value_cache, block_tables, query_start, lens, scale);
      const torch::Tensor reference = paged_attention_reference(
          q.to(torch::kFloat), key_cache.to(torch::kFloat), value_cache.to(torch::kFloat),
          block_tables, query_start, lens, scale);
      // bf16: the output is rounded to bf16 (2^-8 relative).
      const double tolerance = dtype == torch::kFloat ? 1e-5 : 2e-2;
      EXPECT_LT((fused.to(torch::kFloat) - reference).abs().max().item<double>(), tolerance)
          << "head dim " << dim << ", " << dtype;
    }
  }
}

TEST(PagedAttention, BatchOverloadUsesTheHostLayout) {
  PagedFixture f({6, 9}, torch::kFloat);
  const torch::Tensor lens = torch::tensor(f.lengths, torch::kLong);
  PagedBatch batch;
  batch.block_tables = f.block_tables;
  batch.query_start = f.cu_seqlens();
  batch.context_lens = lens;
  batch.layout = read_paged_layout(f.block_tables, batch.query_start, lens);
  const torch::Tensor expected =
      paged_attention(f.q, f.key_cache, f.value_cache, f.block_tables, f.cu_seqlens(), lens, 0.3);
  EXPECT_TRUE(paged_attention(f.q, f.key_cache, f.value_cache, batch, 0.3).equal(expected));
  batch.layout.query_start.back() -= 1;
  EXPECT_THROW(paged_attention(f.q, f.key_cache, f.value_cache, batch, 0.3), c10::Error);
}

// The mask: 0 up to each query's position, -inf past it, rows aligned to 16 elements.
TEST(PagedLayout, MaskHidesKeysPastEachQueryWithAlignedRows) {
  const torch::Tensor positions = torch::tensor(std::vector<int64_t>{0, 2, 4}).view({1, 3, 1});
  const torch::Tensor mask = paged_attention_mask(positions, 5, torch::kFloat);
  EXPECT_EQ(mask.sizes(), (std::vector<int64_t>{1, 3, 5}));
  EXPECT_EQ(mask.stride(1) % 16, 0);
  const float inf = std::numeric_limits<float>::infinity();
  const torch::Tensor expected = torch::tensor(std::vector<float>{0, -inf, -inf, -inf, -inf,  //
                                                                  0, 0, 0, -inf, -inf,        //
                                                                  0, 0, 0, 0, 0})
                                     .view({1, 3, 5});
  EXPECT_TRUE(mask.equal(expected));
}

TEST(PagedLayout, CheckNamesTheSequenceWithABlockOutsideTheCache) {
  PagedLayout layout{{0, 1, 2}, {3, 5}, {0, 0, 1, 9}, 2};
  EXPECT_NO_THROW(layout.check(kBlockSize, 10, 2));
  try {
    layout.check(kBlockSize, 9, 2);
    FAIL() << "block 9 of a 9-block cache accepted";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("sequence 1 uses cache block 9"), std::string::npos)
        << e.what();
  }
  layout.context_lens[0] = 9;  // more than 2 blocks of 4
  EXPECT_THROW(layout.check(kBlockSize, 10, 2), c10::Error);
}

}  // namespace
}  // namespace aspen::kernels
