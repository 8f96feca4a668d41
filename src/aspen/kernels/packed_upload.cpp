#include "aspen/kernels/packed_upload.h"

#include <cstring>
#include <numeric>

#include "aspen/kernels/imports.h"

namespace aspen::kernels {

size_t PackedUpload::add(const std::vector<int64_t>& values, std::vector<int64_t> shape) {
  TORCH_CHECK(!device_.defined(), "PackedUpload::add after upload()");
  if (shape.empty()) shape = {static_cast<int64_t>(values.size())};
  const int64_t count =
      std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
  TORCH_CHECK(count == static_cast<int64_t>(values.size()), "PackedUpload::add: shape holds ",
              count, " values, ", values.size(), " given");
  parts_.push_back({staged_.size(), std::move(shape)});
  staged_.insert(staged_.end(), values.begin(), values.end());
  return parts_.size() - 1;
}

size_t PackedUpload::add_doubles(const std::vector<double>& values) {
  static_assert(sizeof(double) == sizeof(int64_t), "doubles are staged by their bits");
  std::vector<int64_t> bits(values.size());
  if (!values.empty()) std::memcpy(bits.data(), values.data(), values.size() * sizeof(double));
  return add(bits);
}

void PackedUpload::upload(torch::Device device) {
  TORCH_CHECK(!device_.defined(), "PackedUpload::upload called twice");
  const bool pinned = device.is_cuda();
  torch::Tensor host = torch::empty({static_cast<int64_t>(staged_.size())},
                                    torch::TensorOptions().dtype(torch::kLong).pinned_memory(pinned));
  if (!staged_.empty()) {
    std::memcpy(host.data_ptr<int64_t>(), staged_.data(), staged_.size() * sizeof(int64_t));
  }
  device_ = device.is_cpu() ? host : host.to(device, /*non_blocking=*/true);
}

torch::Tensor PackedUpload::part(size_t handle) const {
  TORCH_CHECK(device_.defined(), "PackedUpload::part before upload()");
  TORCH_CHECK(handle < parts_.size(), "PackedUpload::part: no part ", handle);
  const Part& p = parts_[handle];
  const int64_t count =
      std::accumulate(p.shape.begin(), p.shape.end(), int64_t{1}, std::multiplies<int64_t>());
  return device_.narrow(0, static_cast<int64_t>(p.offset), count).view(p.shape);
}

}  // namespace aspen::kernels
