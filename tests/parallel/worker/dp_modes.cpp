// Process-group and data-parallel rank programs:
//   rendezvous                 init the group, check all_reduce_sum and
//                              broadcast_parameters, barrier, print "rank R of W ok"
//   collectives                MAX all-reduce, all_gather and subgroups (4 ranks:
//                              {0,1}, {3,2} and {1,2,3}); prints "rank R collectives ok"
//   dp_train OUT STEPS BUCKET_MB OVERLAP
//                              run the DP problem (dp_problem.h; OVERLAP 1: all-reduce
//                              overlapped with the last backward), save the final
//                              parameters to OUT.rank<R> (torch::save)
//   allreduce_loop DIE_RANK DIE_AFTER [kill|stop]
//                              all-reduce in a loop forever; rank DIE_RANK sends itself
//                              SIGKILL (default) or SIGSTOP (a stalled peer) after
//                              DIE_AFTER iterations (-1: nobody dies)
//   fail_once MARKER           the rendezvous check; then, if file MARKER did not exist
//                              at the start (the first attempt), rank 1 creates it and
//                              exits 3 while the others wait to be stopped (a failed
//                              first attempt, for torchrun to restart); in a later
//                              attempt every rank prints "rank R of W ok (restart N)",
//                              N = TORCHELASTIC_RESTART_COUNT
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "aspen/parallel/data_parallel.h"
#include "aspen/util/error.h"
#include "dp_problem.h"
#include "worker_mode.h"

namespace aspen::testing {

using namespace aspen::parallel;
namespace {

int rendezvous(ProcessGroupHandle& group, const std::vector<std::string>&) {
  const int64_t w = group.world_size();
  check_input(all_reduce_sum(group, int64_t{group.rank()}) == w * (w - 1) / 2 &&
                  all_reduce_sum(group, 0.5) == 0.5 * static_cast<double>(w),
              "all_reduce_sum returned a wrong sum", "rendezvous check");
  torch::Tensor p = torch::full({3}, static_cast<float>(group.rank() + 1));
  broadcast_parameters(group, {{"p", p}}, /*root=*/0);
  check_input(torch::equal(p, torch::ones({3})), "broadcast_parameters did not copy root",
              "rendezvous check");
  group.barrier();
  std::printf("rank %d of %d ok\n", group.rank(), group.world_size());
  return 0;
}

void expect(bool ok, const std::string& what) { check_input(ok, what, "collectives check"); }

int collectives(ProcessGroupHandle& group, const std::vector<std::string>&) {
  const int rank = group.rank();
  expect(group.world_size() == 4, "needs 4 ranks");
  torch::Tensor m = torch::tensor({static_cast<float>(rank), static_cast<float>(-rank)});
  group.all_reduce(m, ReduceOp::kMax);
  expect(torch::equal(m, torch::tensor({3.0f, 0.0f})), "MAX all-reduce");
  const auto gathered = group.all_gather(torch::full({2, 2}, static_cast<double>(rank)));
  expect(gathered.size() == 4, "all_gather count");
  for (int r = 0; r < 4; ++r) {
    expect(torch::equal(gathered[r], torch::full({2, 2}, static_cast<double>(r))),
           "all_gather entry " + std::to_string(r));
  }
  // Three subgroups created in the same order everywhere; membership decides.
  auto low = group.new_subgroup({0, 1});
  auto high = group.new_subgroup({3, 2});
  auto tail = group.new_subgroup({1, 2, 3});
  expect(low.has_value() == (rank < 2) && high.has_value() == (rank >= 2) &&
             tail.has_value() == (rank >= 1),
         "subgroup membership");
  ProcessGroupHandle& pair = rank < 2 ? *low : *high;
  expect(pair.world_size() == 2, "subgroup size");
  // {3, 2}: rank 3 is the subgroup's rank 0.
  const int expected_pair_rank = rank < 2 ? rank : 3 - rank;
  expect(pair.rank() == expected_pair_rank, "subgroup rank order");
  torch::Tensor s = torch::full({1}, static_cast<float>(rank));
  pair.all_reduce_sum(s);
  expect(s.item<float>() == (rank < 2 ? 1.0f : 5.0f), "subgroup all-reduce stays in the pair");
  if (tail) {
    const auto parts = tail->all_gather(torch::full({1}, static_cast<float>(rank)));
    expect(parts.size() == 3 && parts[0].item<float>() == 1.0f && parts[2].item<float>() == 3.0f,
           "3-rank subgroup all_gather");
  }
  group.barrier();
  std::printf("rank %d collectives ok\n", rank);
  return 0;
}

int dp_train(ProcessGroupHandle& group, const std::vector<std::string>& args) {
  check_input(args.size() == 4, "expected OUT STEPS BUCKET_MB OVERLAP", "dp_train");
  const std::string out = args[0];
  const int steps = std::stoi(args[1]);
  DataParallelOptions options;
  options.bucket_mb = std::stod(args[2]);
  const bool overlap = args[3] == "1";
  std::unique_ptr<GradientAllReducer> reducer;
  size_t launched_during_backward = 0;
  auto params = run_dp_problem(
      group.rank(), group.world_size(), steps,
      [&](int64_t local) { return all_reduce_sum(group, local); },
      [&](const NamedParams& named) {
        if (!reducer) reducer = std::make_unique<GradientAllReducer>(group, named, options);
        if (overlap) reducer->prepare_for_backward();
      },
      [&](const NamedParams&) {
        reducer->finish();
        launched_during_backward += reducer->launched_during_backward();
      });
  std::printf("rank %d: %zu buckets, %zu launched during backward\n", group.rank(),
              reducer->buckets().size(), launched_during_backward);
  torch::save(params, out + ".rank" + std::to_string(group.rank()));
  return 0;
}

int allreduce_loop(ProcessGroupHandle& group, const std::vector<std::string>& args) {
  check_input(args.size() == 2 || args.size() == 3, "expected DIE_RANK DIE_AFTER [kill|stop]",
              "allreduce_loop");
  const int die_rank = std::stoi(args[0]);
  const int die_after = std::stoi(args[1]);
  const int die_signal = args.size() == 3 && args[2] == "stop" ? SIGSTOP : SIGKILL;
  torch::Tensor t = torch::ones({1024});
  for (int i = 0;; ++i) {
    if (group.rank() == die_rank && i == die_after) kill(getpid(), die_signal);
    group.all_reduce_sum(t);
    t.fill_(1.0);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

int fail_once(ProcessGroupHandle& group, const std::vector<std::string>& args) {
  check_input(args.size() == 1, "expected MARKER", "fail_once");
  // Read before anyone can create it: every rank of an attempt agrees whether it is the first.
  const bool first = access(args[0].c_str(), F_OK) != 0;
  rendezvous(group, {});
  group.barrier();
  if (first && group.rank() == 1) {
    std::FILE* marker = std::fopen(args[0].c_str(), "w");
    check_input(marker != nullptr, "cannot create the marker", args[0]);
    std::fclose(marker);
    std::printf("rank 1 fails this attempt\n");
    std::fflush(stdout);
    _exit(3);
  }
  if (first) {
    // Healthy, so a torchrun agent on another node restarts this one for its peer's
    // failure without counting a restart of its own; it stops this process before then.
    std::this_thread::sleep_for(std::chrono::seconds(120));
    return 1;
  }
  const char* restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
  std::printf("rank %d of %d ok (restart %s)\n", group.rank(), group.world_size(),
              restart != nullptr ? restart : "none");
  return 0;
}

const RegisterWorkerMode kRendezvous({"rendezvous", "rendezvous", rendezvous});
const RegisterWorkerMode kCollectives({"collectives", "collectives", collectives});
const RegisterWorkerMode kDpTrain({"dp_train", "dp_train OUT STEPS BUCKET_MB OVERLAP", dp_train});
const RegisterWorkerMode kAllreduceLoop(
    {"allreduce_loop", "allreduce_loop DIE_RANK DIE_AFTER [kill|stop]", allreduce_loop});
const RegisterWorkerMode kFailOnce({"fail_once", "fail_once MARKER", fail_once});

}  // namespace
}  // namespace aspen::testing
