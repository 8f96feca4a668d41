#include "aspen/rollout/scheduler.h"

#include <c10/util/Exception.h>

#include <algorithm>

#include "aspen/rollout/imports.h"

namespace aspen::rollout {

Scheduler::Scheduler(SchedulerConfig config, BlockPool& pool) : config_(config), pool_(pool) {
  TORCH_CHECK(
      config_.block_size > 0 && config_.max_num_seqs > 0 && config_.max_num_batched_tokens > 0,
      "Scheduler: sizes must be positive");
}

void Scheduler::add(std::unique_ptr<Sequence> sequence) {
  waiting_.push_back(std::move(sequence));
}

void Scheduler::add_running(std::unique_ptr<Sequence> sequence) {
  running_.push_back(std::move(sequence));
}

bool Scheduler::allocate_slots(Sequence& sequence, int64_t num_new_tokens) {
  const int64_t needed_tokens = sequence.num_computed_tokens + num_new_tokens;
  const int64_t needed_blocks = (needed_tokens + config_.block_size - 1) / config_.block_size;
  const int64_t missing = needed_blocks - static_cast<int64_t>(sequence.block_table.size());
  if (missing <= 0) return true;
  if (missing > pool_.num_free()) return false;
  for (int64_t i = 0; i < missing; ++i) sequence.block_table.push_back(*pool_.allocate());
  return true;
}

int64_t Scheduler::apply_prefix_cache(Sequence& sequence) {
  if (!config_.enable_prefix_caching || sequence.num_computed_tokens != 0) return 0;
  // The last token is always recomputed: its logits give the next token.
  const int64_t max_blocks =
      (static_cast<int64_t>(sequence.tokens.size()) - 1) / config_.block_size;
  BlockHash parent = BlockPool::kNoParent;
  for (int64_t b = 0; b < max_blocks; ++b) {
    const BlockHash hash = BlockPool::chain_hash(
        parent, sequence.tokens.data() + b * config_.block_size, config_.block_size);
    const auto block = pool_.lookup(hash);
    if (!block) break;
    pool_.retain(*block);
    sequence.block_table.push_back(*block);
    sequence.block_hashes.push_back(hash);
    parent = hash;
  }
  sequence.num_computed_tokens =
      static_cast<int64_t>(sequence.block_table.size()) * config_.block_size;
  return sequence.num_computed_tokens;
}

void Scheduler::release_blocks(Sequence& sequence) {
  // Release tail first so the leading (most shareable) prefix blocks are evicted last.
  for (auto it = sequence.block_table.rbegin(); it != sequence.block_table.rend(); ++it) {
    pool_.release(*it);
  }
  sequence.block_table.clear();
  sequence.block_hashes.clear();
  sequence.num_computed_tokens = 0;
}

void Scheduler::preempt_newest() {
  std::unique_ptr<Sequence> victim = std::move(running_.back());
  running_.pop_back();
  release_blocks(*victim);
  ++victim->num_preemptions;
  waiting_.push_front(std::move(victim));
}

SchedulerStep Scheduler::schedule() {
  SchedulerStep step;
  int64_t budget = config_.max_num_batched_tokens;

  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Sequence& sequence = *running_[i];
    const int64_t n = std::min(sequence.num_pending_tokens(), budget);
    if (n == 0) continue;
    bool preempted_self = false;
    while (!allocate_slots(sequence, n)) {
      const bool victim_is_self = running_.back().get() == &sequence;
      preempt_newest();
      ++step.num_preempted;
      if (victim_is_self) {
        preempted_self = true;
        break;
      }
    }
    if (preempted_self) break;
    step.chunks.push_back({&sequence, n});
    budget -= n;
  }

  // Admit waiting sequences only if nothing had to be preempted: memory is tight.
  while (step.num_preempted == 0 && budget > 0 && !waiting_.empty() &&
         static_cast<int64_t>(running_.size()) < config_.max_num_seqs) {
    Sequence& sequence = *waiting_.front();
    const int64_t hit = apply_prefix_cache(sequence);
    const int64_t n = std::min(sequence.num_pending_tokens(), budget);
    if (!allocate_slots(sequence, n)) {
      release_blocks(sequence);  // give back the prefix hits; retry next step
      break;
    }
    step.num_prefix_hit_tokens += hit;
    step.chunks.push_back({&sequence, n});
    budget -= n;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  step.num_tokens = config_.max_num_batched_tokens - budget;
  return step;
}

void Scheduler::complete(const SchedulerStep& step) {
  for (const ScheduledChunk& chunk : step.chunks) {
    Sequence& sequence = *chunk.sequence;
    sequence.num_computed_tokens += chunk.num_new_tokens;
    if (!config_.enable_prefix_caching) continue;
    const int64_t full_blocks = sequence.num_computed_tokens / config_.block_size;
    while (static_cast<int64_t>(sequence.block_hashes.size()) < full_blocks) {
      const int64_t b = static_cast<int64_t>(sequence.block_hashes.size());
      const BlockHash parent = b == 0 ? BlockPool::kNoParent : sequence.block_hashes.back();
      const BlockHash hash = BlockPool::chain_hash(
          parent, sequence.tokens.data() + b * config_.block_size, config_.block_size);
      pool_.register_prefix(sequence.block_table[b], hash);
      sequence.block_hashes.push_back(hash);
    }
  }
}

std::vector<std::unique_ptr<Sequence>> Scheduler::take_finished() {
  std::vector<std::unique_ptr<Sequence>> finished;
  auto keep = std::stable_partition(running_.begin(), running_.end(),
                                    [](const auto& s) { return !s->finished(); });
  for (auto it = keep; it != running_.end(); ++it) {
    release_blocks(**it);
    finished.push_back(std::move(*it));
  }
  running_.erase(keep, running_.end());
  return finished;
}

int64_t Scheduler::remove_request(int64_t request_index) {
  return static_cast<int64_t>(take_request(request_index).size());
}

std::vector<std::unique_ptr<Sequence>> Scheduler::take_request(int64_t request_index) {
  auto of_request = [request_index](const auto& s) { return s->request_index == request_index; };
  std::vector<std::unique_ptr<Sequence>> taken;
  for (auto& sequence : running_) {
    if (!of_request(sequence)) continue;
    release_blocks(*sequence);
    taken.push_back(std::move(sequence));
  }
  running_.erase(std::remove(running_.begin(), running_.end(), nullptr), running_.end());
  for (auto& sequence : waiting_) {
    if (of_request(sequence)) taken.push_back(std::move(sequence));
  }
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), nullptr), waiting_.end());
  return taken;
}

void Scheduler::recompute_all() {
  // Newest first to the queue front, so the original admission order is kept.
  while (!running_.empty()) preempt_newest();
}

}  // namespace aspen::rollout
