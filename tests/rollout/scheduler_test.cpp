#include "aspen/rollout/scheduler.h"

#include <gtest/gtest.h>

#include <numeric>

namespace aspen::rollout {
namespace {

std::unique_ptr<Sequence> make_sequence(int64_t id, int64_t prompt_len, TokenId first = 0) {
  auto sequence = std::make_unique<Sequence>();
  sequence->id = id;
  sequence->tokens.resize(prompt_len);
  std::iota(sequence->tokens.begin(), sequence->tokens.end(), first);
  sequence->prompt_len = prompt_len;
  return sequence;
}

// Pretends the model ran: complete the step, then append one sampled token to
// every sequence whose tokens are all computed.
void run_step(Scheduler& scheduler, const SchedulerStep& step) {
  scheduler.complete(step);
  for (const auto& chunk : step.chunks) {
    if (chunk.sequence->num_pending_tokens() == 0) chunk.sequence->tokens.push_back(7);
  }
}

TEST(Scheduler, ChunkedPrefillRespectsTheTokenBudget) {
  BlockPool pool(64);
  Scheduler scheduler({/*block_size=*/4, /*max_num_seqs=*/8, /*max_num_batched_tokens=*/10, false},
                      pool);
  scheduler.add(make_sequence(0, 25));
  SchedulerStep step = scheduler.schedule();
  ASSERT_EQ(step.chunks.size(), 1u);
  EXPECT_EQ(step.chunks[0].num_new_tokens, 10);
  run_step(scheduler, step);
  EXPECT_EQ(scheduler.schedule().chunks[0].num_new_tokens, 10);
}

TEST(Scheduler, DecodesRunBesideANewPrefillInOneStep) {
  BlockPool pool(64);
  Scheduler scheduler({4, 8, 16, false}, pool);
  scheduler.add(make_sequence(0, 6));
  run_step(scheduler, scheduler.schedule());  // prefill of sequence 0, token sampled
  scheduler.add(make_sequence(1, 30));
  const SchedulerStep step = scheduler.schedule();
  ASSERT_EQ(step.chunks.size(), 2u);
  EXPECT_EQ(step.chunks[0].sequence->id, 0);
  EXPECT_EQ(step.chunks[0].num_new_tokens, 1);   // decode
  EXPECT_EQ(step.chunks[1].num_new_tokens, 15);  // the rest of the budget
}

TEST(Scheduler, CapsRunningSequences) {
  BlockPool pool(64);
  Scheduler scheduler({4, 2, 100, false}, pool);
  for (int i = 0; i < 5; ++i) scheduler.add(make_sequence(i, 3));
  EXPECT_EQ(scheduler.schedule().chunks.size(), 2u);
  EXPECT_EQ(scheduler.running().size(), 2u);
  EXPECT_EQ(scheduler.waiting().size(), 3u);
}

TEST(Scheduler, PreemptsTheNewestWhenBlocksRunOut) {
  BlockPool pool(4);  // 16 token slots
  Scheduler scheduler({4, 8, 100, false}, pool);
  scheduler.add(make_sequence(0, 8));  // 2 blocks
  scheduler.add(make_sequence(1, 8));  // 2 blocks
  run_step(scheduler, scheduler.schedule());
  EXPECT_EQ(pool.num_free(), 0);
  // Both need a third block for their 9th token; only preempting sequence 1 frees one.
  const SchedulerStep step = scheduler.schedule();
  EXPECT_EQ(step.num_preempted, 1);
  ASSERT_EQ(step.chunks.size(), 1u);
  EXPECT_EQ(step.chunks[0].sequence->id, 0);
  ASSERT_EQ(scheduler.waiting().size(), 1u);
  EXPECT_EQ(scheduler.waiting().front()->id, 1);
  EXPECT_EQ(scheduler.waiting().front()->num_computed_tokens, 0);  // recomputed later
  EXPECT_EQ(scheduler.waiting().front()->tokens.size(), 9u);       // keeps its output
}

TEST(Scheduler, FinishedSequencesLeaveAndWaitingOnesJoin) {
  BlockPool pool(64);
  Scheduler scheduler({4, 1, 100, false}, pool);
  scheduler.add(make_sequence(0, 3));
  scheduler.add(make_sequence(1, 3));
  run_step(scheduler, scheduler.schedule());
  scheduler.running()[0]->finish_reason = FinishReason::kStop;
  EXPECT_EQ(scheduler.take_finished().size(), 1u);
  EXPECT_EQ(pool.num_free(), 64);
  const SchedulerStep step = scheduler.schedule();
  ASSERT_EQ(step.chunks.size(), 1u);
  EXPECT_EQ(step.chunks[0].sequence->id, 1);
}

TEST(Scheduler, PrefixCacheServesFullBlocksOfAnEarlierSequence) {
  BlockPool pool(16);
  Scheduler scheduler({4, 8, 100, true}, pool);
  scheduler.add(make_sequence(0, 10));
  run_step(scheduler, scheduler.schedule());
  scheduler.running()[0]->finish_reason = FinishReason::kStop;
  scheduler.take_finished();
  scheduler.add(make_sequence(1, 10));  // same tokens 0..9
  const SchedulerStep step = scheduler.schedule();
  EXPECT_EQ(step.num_prefix_hit_tokens, 8);  // two full blocks; the tail is recomputed
  EXPECT_EQ(step.chunks[0].num_new_tokens, 2);
  pool.reset_prefix_cache();
  scheduler.running()[0]->finish_reason = FinishReason::kStop;
  scheduler.take_finished();
  scheduler.add(make_sequence(2, 10));
  EXPECT_EQ(scheduler.schedule().num_prefix_hit_tokens, 0);
}

TEST(Scheduler, RecomputeAllRequeuesInAdmissionOrder) {
  BlockPool pool(16);
  Scheduler scheduler({4, 8, 100, false}, pool);
  scheduler.add(make_sequence(0, 5));
  scheduler.add(make_sequence(1, 5));
  run_step(scheduler, scheduler.schedule());
  scheduler.recompute_all();
  ASSERT_EQ(scheduler.waiting().size(), 2u);
  EXPECT_EQ(scheduler.waiting()[0]->id, 0);
  EXPECT_EQ(scheduler.waiting()[1]->id, 1);
  EXPECT_EQ(pool.num_free(), 16);
}

}  // namespace
}  // namespace aspen::rollout
