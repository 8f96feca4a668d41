// The process group of an autograd-paired collective, kept in its AutogradContext for
// the backward pass: saved_data holds IValues only, so the handle travels in a capsule
// (an IValue owning a C++ object). Shared by tp_collectives.cpp and
// expert_parallel.cpp; not a public interface.
#pragma once

#include <torch/autograd.h>

#include <utility>

#include "aspen/parallel/imports.h"
#include "aspen/parallel/process_group.h"

namespace aspen::parallel {

struct GroupCapsule : torch::CustomClassHolder {
  explicit GroupCapsule(ProcessGroupHandle group) : group(std::move(group)) {}
  ProcessGroupHandle group;
};

inline void save_group(torch::autograd::AutogradContext* ctx, const ProcessGroupHandle& group) {
  ctx->saved_data["group"] = c10::IValue::make_capsule(c10::make_intrusive<GroupCapsule>(group));
}

inline ProcessGroupHandle saved_group(torch::autograd::AutogradContext* ctx) {
  const auto holder = ctx->saved_data["group"].toCapsule();
  return static_cast<const GroupCapsule*>(holder.get())->group;
}

}  // namespace aspen::parallel
