// CUDA collectives across rank processes:
//   nccl_collectives   each rank on cuda:LOCAL_RANK; sum and max all-reduce,
//                      all_gather and broadcast of CUDA tensors (which go through
//                      NCCL) equal the same collectives on CPU tensors (Gloo);
//                      prints "rank R nccl ok". Needs one GPU per rank.
#include <cstdio>

#include "aspen/parallel/device.h"
#include "aspen/parallel/dist_env.h"
#include "aspen/util/error.h"
#include "worker_mode.h"

namespace aspen::testing {

using namespace aspen::parallel;
namespace {

void expect_same(const torch::Tensor& cuda, const torch::Tensor& cpu, const std::string& what) {
  check_input(cuda.is_cuda(), what + " left the GPU", "nccl check");
  check_input(torch::equal(cuda.cpu(), cpu), what + ": NCCL and Gloo disagree", "nccl check");
}

int nccl_collectives(ProcessGroupHandle& group, const std::vector<std::string>&) {
  const torch::Device device = resolve_device(parse_device_spec("cuda", "nccl check"),
                                              read_dist_env().local_rank, "nccl check");
  const int rank = group.rank();
  torch::Tensor cpu = torch::arange(6, torch::kFloat) * static_cast<float>(rank + 1);
  torch::Tensor gpu = cpu.to(device);
  group.all_reduce_sum(cpu);
  group.all_reduce_sum(gpu);
  expect_same(gpu, cpu, "sum all-reduce");

  cpu = torch::full({4}, static_cast<double>(rank));
  gpu = cpu.to(device);
  group.all_reduce(cpu, ReduceOp::kMax);
  group.all_reduce(gpu, ReduceOp::kMax);
  expect_same(gpu, cpu, "max all-reduce");

  const torch::Tensor part = torch::full({2, 3}, static_cast<float>(rank), torch::kFloat);
  const auto cpu_parts = group.all_gather(part);
  const auto gpu_parts = group.all_gather(part.to(device));
  check_input(gpu_parts.size() == cpu_parts.size(), "all_gather count", "nccl check");
  for (size_t r = 0; r < cpu_parts.size(); ++r) {
    expect_same(gpu_parts[r], cpu_parts[r], "all_gather entry " + std::to_string(r));
  }

  torch::Tensor root = torch::full({5}, static_cast<int64_t>(rank + 7)).to(device);
  group.broadcast(root, /*root=*/group.world_size() - 1);
  expect_same(root, torch::full({5}, static_cast<int64_t>(group.world_size() + 6)), "broadcast");
  group.barrier();
  std::printf("rank %d nccl ok\n", rank);
  return 0;
}

const RegisterWorkerMode kNcclCollectives{
    {"nccl_collectives", "nccl_collectives", nccl_collectives}};

}  // namespace
}  // namespace aspen::testing
