#include "aspen/train/whole_model_norm.h"

#include <functional>
#include <string>
#include <vector>

#include "aspen/model/expert_parallel_state.h"
#include "aspen/model/tp_layout.h"
#include "aspen/train/imports.h"

namespace aspen::train {

void set_whole_model_clip_norm(Optimizer& optimizer, const ModelConfig& config,
                               const TensorParallel& tp, const ExpertParallel& ep,
                               const PipelineStages& pp, bool tied_embedding_on_stages) {
  std::vector<ProcessGroupHandle> groups;  // reduced in this order (see the header)
  std::function<double(const std::string&)> within_stage = [](const std::string&) { return 1.0; };
  if (tp.enabled()) {
    const int size = tp.size;
    within_stage = [config, size](const std::string& name) {
      return static_cast<double>(copies_of(qwen_shard_spec(name, config), size));
    };
    groups.push_back(tp.require_group("tensor parallelism's clip norm"));
  } else if (ep.enabled() && !ep.replicated_tokens) {
    const int size = ep.size;
    within_stage = [size](const std::string& name) {
      return is_expert_parameter(name) ? 1.0 : static_cast<double>(size);
    };
    groups.push_back(*ep.group);
  }
  const bool tied_copy =
      pp.enabled() && tied_embedding_on_stages && (pp.first() || pp.last());
  if (pp.enabled()) groups.push_back(pp.require_group("pipeline parallelism's clip norm"));
  if (groups.empty()) return;
  optimizer.set_sharded_norm(
      [within_stage, tied_copy](const std::string& name) {
        return within_stage(name) * (tied_copy && name == "model.embed_tokens.weight" ? 2.0 : 1.0);
      },
      [groups](torch::Tensor& sum) mutable {
        for (ProcessGroupHandle& group : groups) group.all_reduce_sum(sum);
      });
}

}  // namespace aspen::train
