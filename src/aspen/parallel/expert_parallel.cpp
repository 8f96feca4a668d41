#include "aspen/parallel/expert_parallel.h"

#include <numeric>

#include "aspen/parallel/group_capsule.h"
#include "aspen/parallel/imports.h"
#include "aspen/util/error.h"

namespace aspen::parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class AllToAllRows : public torch::autograd::Function<AllToAllRows> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const ProcessGroupHandle& group, std::vector<int64_t> send_rows,
                               std::vector<int64_t> recv_rows) {
    save_group(ctx, group);
    ctx->saved_data["send"] = send_rows;
    ctx->saved_data["recv"] = recv_rows;
    ProcessGroupHandle g = group;
    return g.all_to_all(x, send_rows, recv_rows);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const std::vector<int64_t> send = ctx->saved_data["send"].toIntVector();
    const std::vector<int64_t> recv = ctx->saved_data["recv"].toIntVector();
    ProcessGroupHandle group = saved_group(ctx);
    return {group.all_to_all(grads[0], recv, send), {}, {}, {}};
  }
};

}  // namespace

ExpertParallel ExpertParallel::over(const ProcessGroupHandle& group, bool replicated_tokens) {
  ExpertParallel ep;
  ep.size = group.world_size();
  ep.rank = group.rank();
  ep.replicated_tokens = replicated_tokens;
  if (ep.size > 1) ep.group = group;
  return ep;
}

void ExpertParallel::validate(const std::string& what) const {
  check_input(size >= 1 && rank >= 0 && rank < size,
              "EP rank " + std::to_string(rank) + " is not in [0, " + std::to_string(size) + ")",
              what);
  if (size == 1) return;
  check_input(group.has_value() && group->world_size() == size && group->rank() == rank,
              "EP size " + std::to_string(size) + " needs a process group of that size in "
              "which this is rank " + std::to_string(rank),
              what);
}

int64_t ExpertParallel::local_expert_count(int64_t num_experts) const {
  check_input(num_experts % size == 0,
              "expert parallel size " + std::to_string(size) + " does not divide num_experts = " +
                  std::to_string(num_experts),
              "expert parallelism");
  return num_experts / size;
}

int64_t ExpertParallel::first_local_expert(int64_t num_experts) const {
  return rank * local_expert_count(num_experts);
}

torch::Tensor all_to_all_rows(const torch::Tensor& x, const std::vector<int64_t>& send_rows,
                              const std::vector<int64_t>& recv_rows, const ExpertParallel& ep) {
  if (!ep.enabled()) return x;
  const std::string what = "expert-parallel all-to-all";
  check_input(ep.group.has_value(), "needs an expert-parallel process group", what);
  check_input(std::accumulate(send_rows.begin(), send_rows.end(), int64_t{0}) == x.size(0),
              "the send counts do not add up to the rows given", what);
  return AllToAllRows::apply(x, *ep.group, send_rows, recv_rows);
}

}  // namespace aspen::parallel
