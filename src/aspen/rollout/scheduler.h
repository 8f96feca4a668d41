// Scheduler: token-budget continuous batching in the manner of vLLM v1.
//
// Each step hands out at most `max_num_batched_tokens` tokens: first to running
// sequences in admission order (a decode needs 1, an unfinished prefill gets a
// chunk — chunked prefill), then to waiting ones while fewer than `max_num_seqs`
// run. A waiting sequence first takes whatever leading full blocks of its tokens
// the prefix cache holds. When the pool has no block for a running sequence, the
// newest running sequence is preempted: its blocks are released and it goes back
// to the front of the waiting queue to be recomputed (prompt and output so far).
// Sequences that finish leave after any step and waiting ones join at the next,
// so no sequence ever waits for another to finish.
//
// Thread safety: none; owned and driven by one engine thread.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "aspen/rollout/block_pool.h"
#include "aspen/rollout/imports.h"
#include "aspen/rollout/sequence.h"

namespace aspen::rollout {

struct SchedulerConfig {
  int64_t block_size = 16;
  int64_t max_num_seqs = 64;
  int64_t max_num_batched_tokens = 1024;
  bool enable_prefix_caching = true;
};

struct ScheduledChunk {
  Sequence* sequence;
  int64_t num_new_tokens;  // tokens [num_computed, num_computed + n) run this step
};

struct SchedulerStep {
  std::vector<ScheduledChunk> chunks;
  int64_t num_tokens = 0;
  int64_t num_preempted = 0;
  int64_t num_prefix_hit_tokens = 0;
  bool empty() const { return chunks.empty(); }
};

class Scheduler {
 public:
  Scheduler(SchedulerConfig config, BlockPool& pool);

  void add(std::unique_ptr<Sequence> sequence);  // to the back of the waiting queue
  SchedulerStep schedule();
  // After the step ran: chunk tokens are computed; full blocks enter the prefix cache.
  void complete(const SchedulerStep& step);
  // Adds a sequence forked from a running one (already holding its blocks) right
  // behind it in the running list.
  void add_running(std::unique_ptr<Sequence> sequence);
  // Removes finished sequences from the running list, releasing their blocks, and
  // returns them.
  std::vector<std::unique_ptr<Sequence>> take_finished();
  // Drops every sequence (running or waiting) of the request with this admission
  // index, releasing the blocks it holds. Returns how many were dropped.
  int64_t remove_request(int64_t request_index);
  // The same, handing the dropped sequences to the caller (running ones first, in
  // their order, then waiting ones), their blocks released.
  std::vector<std::unique_ptr<Sequence>> take_request(int64_t request_index);
  // Releases every running sequence's blocks and requeues it for recomputation
  // (used when weights change and in-flight requests must continue on new weights).
  void recompute_all();

  const std::vector<std::unique_ptr<Sequence>>& running() const { return running_; }
  const std::deque<std::unique_ptr<Sequence>>& waiting() const { return waiting_; }
  const SchedulerConfig& config() const { return config_; }
  BlockPool& pool() { return pool_; }

 private:
  bool allocate_slots(Sequence& sequence, int64_t num_new_tokens);
  int64_t apply_prefix_cache(Sequence& sequence);
  void release_blocks(Sequence& sequence);
  void preempt_newest();

  SchedulerConfig config_;
  BlockPool& pool_;
  std::vector<std::unique_ptr<Sequence>> running_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
};

}  // namespace aspen::rollout
