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

// The tensor whose consecutive row blocks `parts` already are (contiguous, back to back
// in one storage, same dtype and device), or undefined when they are not. Such members
// view another projection's fused W (a model sharing another's weights:
// model/shared_base.h): they are fused already, and copying them into a new W would
// hold those weights twice.
torch::Tensor adjacent_rows(const std::vector<torch::Tensor>& parts) {
  const torch::Tensor& first = parts.front();
  if (!first.defined() || first.dim() < 1) return {};
  int64_t row_elements = 1;
  for (int64_t d = 1; d < first.dim(); ++d) row_elements *= first.size(d);
  int64_t rows = 0;
  for (const torch::Tensor& part : parts) {
    if (!part.defined() || !part.is_contiguous() || part.dim() != first.dim() ||
        part.sizes().slice(1) != first.sizes().slice(1) ||
        part.scalar_type() != first.scalar_type() || part.device() != first.device() ||
        !part.storage().is_alias_of(first.storage()) ||
        part.storage_offset() != first.storage_offset() + rows * row_elements) {
      return {};
    }
    rows += part.size(0);
  }
  std::vector<int64_t> sizes = first.sizes().vec();
  sizes[0] = rows;
  std::vector<int64_t> strides(sizes.size(), 1);  // contiguous
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * sizes[d + 1];
  return first.as_strided(sizes, strides);
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
  std::vector<torch::Tensor> weights, biases;
  for (const auto& member : members) {
    weights.push_back(member->weight);
    biases.push_back(member->bias);
  }
  const torch::Tensor shared_weight = adjacent_rows(weights);
  const torch::Tensor shared_bias = with_bias ? adjacent_rows(biases) : torch::Tensor();
  if (shared_weight.defined() && (!with_bias || shared_bias.defined())) {
    // Already laid out as one W (another model's, shared): adopt it without a copy.
    members_ = members;
    widths_ = std::move(widths);
    weight_ = shared_weight.detach();
    bias_ = with_bias ? shared_bias.detach() : torch::Tensor();
    return;
  }
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
