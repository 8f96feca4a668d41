// aspen_dist_worker MODE ARGS...: one rank of a distributed test, started by
// `aspen launch` or directly with RANK/WORLD_SIZE/MASTER_* set.
//   rendezvous                 init the group, check all_reduce_sum and
//                              broadcast_parameters, barrier, print "rank R of W ok"
//   dp_train OUT STEPS BUCKET_MB OVERLAP
//                              run the DP problem (dp_problem.h; OVERLAP 1: all-reduce
//                              overlapped with the last backward), save the final
//                              parameters to OUT.rank<R> (torch::save)
//   allreduce_loop DIE_RANK DIE_AFTER [kill|stop]
//                              all-reduce in a loop forever; rank DIE_RANK sends itself
//                              SIGKILL (default) or SIGSTOP (a stalled peer) after
//                              DIE_AFTER iterations (-1: nobody dies)
// Errors print "aspen_dist_worker: error: ..." and exit 1.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <cstdio>
#include <string>
#include <thread>

#include "aspen/parallel/data_parallel.h"
#include "aspen/parallel/dist_env.h"
#include "aspen/parallel/process_group.h"
#include "aspen/util/error.h"
#include "dp_problem.h"

namespace {

int run(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const aspen::DistEnv env = aspen::read_dist_env();
  aspen::ProcessGroupHandle group = aspen::init_process_group(env);
  if (mode == "rendezvous") {
    const int64_t w = group.world_size();
    aspen::check_input(aspen::all_reduce_sum(group, int64_t{group.rank()}) == w * (w - 1) / 2 &&
                           aspen::all_reduce_sum(group, 0.5) == 0.5 * static_cast<double>(w),
                       "all_reduce_sum returned a wrong sum", "rendezvous check");
    torch::Tensor p = torch::full({3}, static_cast<float>(group.rank() + 1));
    aspen::broadcast_parameters(group, {{"p", p}}, /*root=*/0);
    aspen::check_input(torch::equal(p, torch::ones({3})), "broadcast_parameters did not copy root",
                       "rendezvous check");
    group.barrier();
    std::printf("rank %d of %d ok\n", group.rank(), group.world_size());
    return 0;
  }
  if (mode == "dp_train" && argc == 6) {
    const std::string out = argv[2];
    const int steps = std::stoi(argv[3]);
    aspen::DataParallelOptions options;
    options.bucket_mb = std::stod(argv[4]);
    const bool overlap = std::string(argv[5]) == "1";
    std::unique_ptr<aspen::GradientAllReducer> reducer;
    auto make_reducer = [&](const aspen::NamedParams& named) {
      if (!reducer) reducer = std::make_unique<aspen::GradientAllReducer>(group, named, options);
    };
    size_t launched_during_backward = 0;
    auto params = aspen::testing::run_dp_problem(
        group.rank(), group.world_size(), steps,
        [&](int64_t local) { return aspen::all_reduce_sum(group, local); },
        [&](const aspen::NamedParams& named) {
          make_reducer(named);
          if (overlap) reducer->prepare_for_backward();
        },
        [&](const aspen::NamedParams& named) {
          reducer->finish();
          launched_during_backward += reducer->launched_during_backward();
        });
    std::printf("rank %d: %zu buckets, %zu launched during backward\n", group.rank(),
                reducer->buckets().size(), launched_during_backward);
    torch::save(params, out + ".rank" + std::to_string(group.rank()));
    return 0;
  }
  if (mode == "allreduce_loop" && (argc == 4 || argc == 5)) {
    const int die_rank = std::stoi(argv[2]);
    const int die_after = std::stoi(argv[3]);
    const int die_signal = argc == 5 && std::string(argv[4]) == "stop" ? SIGSTOP : SIGKILL;
    torch::Tensor t = torch::ones({1024});
    for (int i = 0;; ++i) {
      if (group.rank() == die_rank && i == die_after) kill(getpid(), die_signal);
      group.all_reduce_sum(t);
      t.fill_(1.0);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  throw aspen::Error("unknown mode or wrong arguments", mode,
                     "rendezvous | dp_train OUT STEPS BUCKET_MB OVERLAP | allreduce_loop DIE_RANK DIE_AFTER [kill|stop]");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "aspen_dist_worker: error: %s\n", e.what());
    return 1;
  }
}
