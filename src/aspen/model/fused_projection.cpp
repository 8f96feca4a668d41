#include "aspen/model/fused_projection.h"

#include <string>

#include "aspen/kernels/small_batch_linear.h"
#include "aspen/model/imports.h"
#include "aspen/util/error.h"

namespace aspen::model {
namespace {

// Rows [begin, begin + rows) of `matrix` (a bias when 1-D).
torch::Tensor rows_of(const torch::Tensor& matrix, int64_t begin, int64_t rows) {
  return matrix.narrow(0, begin, rows);
}

bool views(const torch::Tensor& parameter, const torch::Tensor& rows) {
  return parameter.defined() && parameter.data_ptr() == rows.data_ptr() &&
         parameter.sizes() == rows.sizes() && parameter.strides() == rows.strides() &&
         parameter.scalar_type() == rows.scalar_type() && parameter.device() == rows.device();
}

}  // namespace

void FusedProjection::fuse(const std::vector<torch::nn::Linear>& members) {
  check_input(!members.empty(), "nothing to fuse", "fused projection");
  if (intact() && members.size() == members_.size()) {
    bool same = true;
    for (size_t i = 0; i < members.size(); ++i) same = same && members[i].get() == members_[i].get();
    if (same) return;
  }
  const torch::Tensor& first = members.front()->weight;
  const bool with_bias = members.front()->bias.defined();
  int64_t total = 0;
  std::vector<int64_t> widths;
  for (size_t i = 0; i < members.size(); ++i) {
    const torch::Tensor& w = members[i]->weight;
    const std::string name = "fused projection member " + std::to_string(i);
    check_input(w.dim() == 2 && w.size(1) == first.size(1),
                "expected a [out, " + std::to_string(first.size(1)) + "] weight", name);
    check_input(w.scalar_type() == first.scalar_type() && w.device() == first.device(),
                "expected the dtype and device of member 0", name);
    check_input(members[i]->bias.defined() == with_bias,
                "expected every member with a bias or none", name);
    widths.push_back(w.size(0));
    total += w.size(0);
  }
  torch::NoGradGuard no_grad;
  torch::Tensor weight = torch::empty({total, first.size(1)}, first.options());
  torch::Tensor bias = with_bias ? torch::empty({total}, members.front()->bias.options())
                                 : torch::Tensor();
  int64_t begin = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    torch::nn::LinearImpl& member = *members[i].ptr();
    rows_of(weight, begin, widths[i]).copy_(member.weight);
    member.weight.set_data(rows_of(weight, begin, widths[i]));
    if (with_bias) {
      rows_of(bias, begin, widths[i]).copy_(member.bias);
      member.bias.set_data(rows_of(bias, begin, widths[i]));
    }
    begin += widths[i];
  }
  members_ = members;
  widths_ = std::move(widths);
  weight_ = std::move(weight);
  bias_ = std::move(bias);
}

bool FusedProjection::intact() const {
  if (!weight_.defined()) return false;
  int64_t begin = 0;
  for (size_t i = 0; i < members_.size(); ++i) {
    if (!views(members_[i]->weight, rows_of(weight_, begin, widths_[i]))) return false;
    if (bias_.defined() && !views(members_[i]->bias, rows_of(bias_, begin, widths_[i])))
      return false;
    begin += widths_[i];
  }
  return true;
}

bool FusedProjection::usable_for_inference() const {
  if (!intact()) return false;
  if (!torch::GradMode::is_enabled()) return true;
  for (const auto& member : members_) {
    if (member->weight.requires_grad()) return false;
    if (member->bias.defined() && member->bias.requires_grad()) return false;
  }
  return true;
}

torch::Tensor FusedProjection::forward(const torch::Tensor& x) const {
  return small_batch_linear(x, weight_, bias_);
}

std::vector<torch::Tensor> FusedProjection::split(const torch::Tensor& fused_output) const {
  std::vector<torch::Tensor> parts;
  int64_t begin = 0;
  for (int64_t width : widths_) {
    parts.push_back(fused_output.narrow(-1, begin, width));
    begin += width;
  }
  return parts;
}

}  // namespace aspen::model
