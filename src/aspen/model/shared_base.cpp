#include "aspen/model/shared_base.h"

#include <string>

#include "aspen/model/imports.h"
#include "aspen/util/error.h"

namespace aspen::model {
namespace {

// Points each of `to`'s tensors at the same-named tensor of `from` (the same set of
// names: both modules are built from one config).
void alias_all(torch::OrderedDict<std::string, torch::Tensor> to,
               const torch::OrderedDict<std::string, torch::Tensor>& from) {
  TORCH_CHECK(to.size() == from.size(), "a model of the same config has other tensors");
  for (auto& item : to) {
    const torch::Tensor* source = from.find(item.key());
    TORCH_CHECK(source != nullptr, "no tensor ", item.key(), " in the shared model");
    item.value().set_data(*source);
  }
}

}  // namespace

QwenForCausalLM share_base_weights(const QwenForCausalLM& base) {
  check_input(!base->has_lora(), "the model to share already has LoRA adapters",
              "shared base model", "share the base before attaching adapters");
  QwenForCausalLM shared(base->config, base->tp, base->ep);
  torch::NoGradGuard no_grad;
  alias_all(shared->named_parameters(/*recurse=*/true), base->named_parameters(/*recurse=*/true));
  alias_all(shared->named_buffers(/*recurse=*/true), base->named_buffers(/*recurse=*/true));
  // A frozen base, as attach_lora leaves it: nothing trains through the shared storage.
  for (auto& parameter : shared->parameters(/*recurse=*/true)) parameter.set_requires_grad(false);
  return shared;
}

}  // namespace aspen::model
