// ExpertParallel: where this process sits in an expert-parallel (EP) group, and the
// all-to-all that moves tokens to the ranks holding their experts and back.
//
// With EP size p, the E experts of every MoE layer are split into p contiguous blocks:
// rank r holds experts [r*E/p, (r+1)*E/p) (local_experts), under their HF names, and no
// others. Everything else (attention, norms, embeddings, routers) is replicated on the
// EP ranks, which in training are data-parallel ranks each with its own tokens: their
// gradients are summed over the ranks as data parallelism does, while an expert's
// gradient is complete on its one holder, because the all-to-all's backward brings
// every rank's contribution to it.
//
// all_to_all_rows(x, send_rows, recv_rows): forward sends send_rows[d] consecutive rows
// of x to rank d and returns the recv_rows[s] rows from each rank s, in rank order;
// backward sends the gradients back the reverse way (the same collective with the
// counts swapped). Every rank of the group must call it in the same order (c10d).
// With size 1 it returns x and records nothing.
//
// Thread safety: as TensorParallel. Errors: aspen::Error for an inconsistent context,
// counts that do not match x, or a failed collective.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "aspen/parallel/imports.h"
#include "aspen/parallel/process_group.h"

namespace aspen::parallel {

struct ExpertParallel {
  int size = 1;
  int rank = 0;
  std::optional<ProcessGroupHandle> group;  // engaged iff size > 1
  // Every rank of the group holds the SAME tokens (a rollout instance whose ranks step
  // one batch together), instead of its own: a MoE layer then runs its local experts on
  // the tokens routed to them and sums the partial outputs over the group (one
  // all-reduce), with no all-to-all and no expert work done twice.
  bool replicated_tokens = false;

  // The EP context spanning every rank of `group`.
  static ExpertParallel over(const ProcessGroupHandle& group, bool replicated_tokens = false);

  bool enabled() const { return size > 1; }
  // aspen::Error naming `what` unless the context is consistent (as TensorParallel).
  void validate(const std::string& what) const;
  // First expert and count this rank holds of `num_experts` (which size must divide:
  // aspen::Error naming num_experts otherwise).
  int64_t first_local_expert(int64_t num_experts) const;
  int64_t local_expert_count(int64_t num_experts) const;
};

torch::Tensor all_to_all_rows(const torch::Tensor& x, const std::vector<int64_t>& send_rows,
                              const std::vector<int64_t>& recv_rows, const ExpertParallel& ep);

}  // namespace aspen::parallel
