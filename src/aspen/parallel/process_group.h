// ProcessGroupHandle: this rank's membership in a c10d process group, plus the few
// collectives Aspen uses. It is the one place that touches c10d (process_group.cpp),
// so the rest of Aspen never includes c10d headers. Collectives on CPU tensors go
// through Gloo; collectives on CUDA tensors through NCCL (a group formed on the first
// CUDA collective; each rank's tensors must be on its own device, cuda:LOCAL_RANK).
//
// init_process_group(env):
//   1. Rank 0 serves a c10d TCPStore on MASTER_PORT, listening only on
//      store_address(env) (dist_env.h: 127.0.0.1 when every rank is on this node,
//      MASTER_ADDR otherwise); every rank (rank 0 included) connects there within
//      env.rendezvous_timeout. Under torchrun (env.agent_store) the agent already
//      serves it at MASTER_ADDR:MASTER_PORT and rank 0 connects like the others.
//   2. The ranks agree on a session that rank 0 opens afresh for this start and
//      every rank joins; a missing rank gives aspen::Error "rank N never arrived
//      within T s" (listing every missing rank) instead of a hang. All later keys
//      live under that session, so a store that outlives a start (torchrun's keeps
//      its keys across worker restarts) never mixes two starts' keys.
//   3. A ProcessGroupGloo is formed over the store, with env.collective_timeout as
//      the Gloo timeout: a collective whose peer died or stalls fails within it.
// Errors: aspen::Error for rendezvous failures (unreachable store, port in use,
// missing ranks) and for failed collectives (naming the op and the rank; the usual
// cause is a peer that died).
// Thread safety: like c10d process groups, collectives must be issued in the same
// order on every rank; issue them from one thread per group. The handle is cheap
// to copy (shared ownership).
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "aspen/parallel/dist_env.h"
#include "aspen/parallel/imports.h"

namespace aspen::parallel {

// An in-flight collective. wait() blocks until it completes and throws aspen::Error
// if it failed; waiting twice is a no-op. Destroying it without wait() leaves the
// collective running in the background (its tensors stay alive).
class PendingWork {
 public:
  PendingWork() = default;
  explicit PendingWork(std::function<void()> wait) : wait_(std::move(wait)) {}
  void wait();
  bool pending() const { return static_cast<bool>(wait_); }

 private:
  std::function<void()> wait_;
};

enum class ReduceOp { kSum, kMax };

class ProcessGroupHandle {
 public:
  struct Impl;
  explicit ProcessGroupHandle(std::shared_ptr<Impl> impl);

  int rank() const;
  int world_size() const;
  std::chrono::milliseconds collective_timeout() const;

  // In-place reduction over all ranks. `tensor` must be contiguous, same shape/dtype on
  // every rank.
  void all_reduce(torch::Tensor& tensor, ReduceOp op);
  PendingWork all_reduce_async(torch::Tensor tensor, ReduceOp op);
  void all_reduce_sum(torch::Tensor& tensor) { all_reduce(tensor, ReduceOp::kSum); }
  PendingWork all_reduce_sum_async(torch::Tensor tensor) {
    return all_reduce_async(std::move(tensor), ReduceOp::kSum);
  }
  // Every rank's `tensor` (same shape/dtype everywhere), in rank order; entry rank()
  // is a copy of the input.
  std::vector<torch::Tensor> all_gather(const torch::Tensor& tensor);
  // Variable-size all-to-all along dim 0 (c10d alltoall_base): rank r sends rows
  // [sum(send_rows[..d]), + send_rows[d]) of `input` to rank d and receives
  // recv_rows[s] rows from rank s, concatenated in rank order. send_rows/recv_rows
  // have world_size() entries; recv_rows must be what the peers send (exchange the
  // counts first). Rows keep input's trailing shape and dtype.
  torch::Tensor all_to_all(const torch::Tensor& input, const std::vector<int64_t>& send_rows,
                           const std::vector<int64_t>& recv_rows);
  // In-place: every rank receives `root`'s tensor.
  void broadcast(torch::Tensor& tensor, int root);
  // Point-to-point (pipeline parallelism, parallel/pipeline_p2p.h). send_async hands
  // `tensor` (contiguous) to rank `dst` and returns at once; the work keeps the tensor
  // alive until it completes. recv fills `tensor` (contiguous, exactly the size and
  // dtype that was sent) from rank `src` and blocks until it arrived. Messages between
  // one pair of ranks with the same `tag` arrive in the order they were sent. Unlike
  // the collectives, only the two ranks take part.
  PendingWork send_async(torch::Tensor tensor, int dst, int tag = 0);
  void recv(torch::Tensor& tensor, int src, int tag = 0);
  void barrier();

  // A group over `ranks` (ranks of THIS group, distinct, any order: the new group's
  // rank i is ranks[i]). Collective in the c10d sense: every rank of this group must
  // call new_subgroup with the same lists in the same order, members or not. Returns
  // the member's handle, std::nullopt on non-members. aspen::Error for a bad list.
  std::optional<ProcessGroupHandle> new_subgroup(const std::vector<int>& ranks);

 private:
  std::shared_ptr<Impl> impl_;
};

// Rendezvous and group creation as described above. Blocks until every rank arrived.
ProcessGroupHandle init_process_group(const DistEnv& env);

}  // namespace aspen::parallel
