// PackedSeqs: the layout every algo function works on. A batch of B responses is
// one flat [T] tensor of response tokens (no padding); `cu_seqlens` [B+1] int64
// holds the offsets: sequence b owns tokens cu_seqlens[b] .. cu_seqlens[b+1]-1.
//
// Shape letters used across src/aspen/algo: B = rows (sequences), T = packed
// response tokens, G = number of groups (prompts), L_b = length of sequence b.
//
// PackedSeqs validates cu_seqlens once (1-D int64, cu[0] = 0, non-decreasing)
// and caches what every function needs: per-row lengths [B], the row id of
// every token [T], and the offsets on the host (for the sequential recurrences
// below). Empty sequences (L_b = 0) are allowed.
//
// Helpers (all differentiable in their tensor argument unless stated):
//   broadcast_rows(v)      [B] -> [T]:  out[t] = v[row(t)]
//   segment_sum(x)         [T] -> [B]:  out[b] = sum_{t in b} x[t]
//   place_at_last_token(v) [B] -> [T]:  out[last token of b] = v[b], 0 elsewhere
//                                       (with a loss mask: its last model token)
//   discounted_reverse_cumsum(x, g) [T] -> [T], per sequence, no gradient:
//                                       out[t] = x[t] + g * out[t+1] (out[L_b] = 0);
//                                       with a loss mask over each row's model tokens
//                                       (environment tokens skipped, 0 there)
//
// Loss mask (multi-turn trajectories, issue #35): with_loss_mask(mask) returns the
// same layout carrying a [T] mask, true for a token the policy generated (a "model
// token": trained on) and false for an environment token (a tool result or
// observation inside the response: it conditions later tokens but is never trained
// on, and its old/rollout log-probs, advantages and values are meaningless). Every
// algo function reads it through the accessors below: losses and metrics sum over
// model tokens only and count only them in denominators, the estimators treat a row
// as its compacted sequence of model tokens (compact()/expand()) and put 0 at
// environment tokens. Without a mask every accessor is the unmasked quantity and
// every function takes exactly its unmasked code path (bit-identical results).
//
// Thread safety: a PackedSeqs is immutable after construction; share freely.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "aspen/algo/imports.h"

namespace aspen::algo {

class PackedSeqs {
 public:
  // Throws aspen::Error if cu_seqlens is malformed. Reads it on the host once
  // (one small device->host copy); derived tensors live on cu_seqlens' device.
  static PackedSeqs from_cu_seqlens(const torch::Tensor& cu_seqlens);
  // Convenience for callers and tests holding lengths on the host.
  static PackedSeqs from_lengths(const std::vector<int64_t>& lengths,
                                 torch::Device device = torch::kCPU);

  int64_t num_seqs() const { return static_cast<int64_t>(host_offsets_.size()) - 1; }
  int64_t num_tokens() const { return host_offsets_.back(); }
  const torch::Tensor& cu_seqlens() const { return cu_seqlens_; }             // [B+1] int64
  const torch::Tensor& lengths() const { return lengths_; }                   // [B] int64
  const torch::Tensor& row_ids() const { return row_ids_; }                   // [T] int64
  const std::vector<int64_t>& host_offsets() const { return host_offsets_; }  // B+1

  // Throws aspen::Error unless x is 1-D with T (resp. B) elements; `what` names the
  // argument in the message ("policy_loss: advantages").
  void check_tokens(const torch::Tensor& x, const std::string& what) const;
  void check_rows(const torch::Tensor& x, const std::string& what) const;

  // This layout with `mask` [T] (any dtype, every entry 0 or 1; nonzero = model
  // token) as its loss mask; an undefined mask returns the layout unmasked. Reads the
  // mask on the host once. Throws aspen::Error for a mis-shaped mask or another value.
  PackedSeqs with_loss_mask(const torch::Tensor& mask) const;
  bool has_loss_mask() const { return loss_mask_.defined(); }
  const torch::Tensor& loss_mask() const { return loss_mask_; }  // [T] bool; undefined: none
  // Model tokens: in all (N), per row [B] int64, and their positions [N] int64 in [T].
  int64_t num_loss_tokens() const { return num_loss_tokens_; }
  const torch::Tensor& loss_lengths() const { return has_loss_mask() ? loss_lengths_ : lengths_; }
  const torch::Tensor& loss_token_index() const { return loss_token_index_; }  // masked only
  // The layout of the compacted batch: row b holds its model tokens only, in order.
  // Without a mask: *this.
  const PackedSeqs& compacted() const;
  // x [T] -> its model tokens [N] (compact), and y [N] -> [T] with 0 at environment
  // tokens (expand). Without a mask both return their argument.
  torch::Tensor compact(const torch::Tensor& x) const;
  torch::Tensor expand(const torch::Tensor& y) const;
  // x with 0 at environment tokens (torch::where, so NaN/inf there do not leak);
  // x itself without a mask.
  torch::Tensor zero_masked(const torch::Tensor& x) const;
  // x with `fill` [T] at environment tokens: neutral inputs so that garbage in a
  // masked position cannot reach a gradient (0 * NaN); x itself without a mask.
  torch::Tensor fill_masked(const torch::Tensor& x, const torch::Tensor& fill) const;

 private:
  PackedSeqs() = default;
  torch::Tensor cu_seqlens_;
  torch::Tensor lengths_;
  torch::Tensor row_ids_;
  std::vector<int64_t> host_offsets_;
  // Loss mask (see above); num_loss_tokens_ is num_tokens() without one.
  torch::Tensor loss_mask_;
  torch::Tensor loss_lengths_;
  torch::Tensor loss_token_index_;
  int64_t num_loss_tokens_ = 0;
  std::shared_ptr<const PackedSeqs> compacted_;
};

torch::Tensor broadcast_rows(const torch::Tensor& per_row, const PackedSeqs& packed);

torch::Tensor segment_sum(const torch::Tensor& per_token, const PackedSeqs& packed);

// Throws aspen::Error if a sequence is empty (with a mask: has no model token): its
// value would have nowhere to go.
torch::Tensor place_at_last_token(const torch::Tensor& per_row, const PackedSeqs& packed);

// The recurrence is sequential in time over [T] scalars, so it runs as one host
// loop in fp64 (cheaper than max(L_b) kernel launches); the result is returned
// on x's device with x's dtype. Not differentiable: its inputs are rewards/values.
torch::Tensor discounted_reverse_cumsum(const torch::Tensor& x, const PackedSeqs& packed,
                                        double gamma);

}  // namespace aspen::algo
