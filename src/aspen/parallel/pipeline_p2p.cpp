#include "aspen/parallel/pipeline_p2p.h"

#include <string>
#include <vector>

#include "aspen/parallel/imports.h"
#include "aspen/util/error.h"

namespace aspen::parallel {

PendingWork send_tensor(ProcessGroupHandle& group, const torch::Tensor& tensor, int dst, int tag) {
  check_input(tensor.dim() <= kMaxDims,
              "a tensor of " + std::to_string(tensor.dim()) + " dims (at most " +
                  std::to_string(kMaxDims) + ")",
              "pipeline send to rank " + std::to_string(dst));
  torch::Tensor header = torch::zeros({kHeaderLength}, torch::kLong);
  auto* h = header.data_ptr<int64_t>();
  h[0] = static_cast<int64_t>(tensor.scalar_type());
  h[1] = tensor.dim();
  for (int64_t d = 0; d < tensor.dim(); ++d) h[2 + d] = tensor.size(d);
  PendingWork header_sent = group.send_async(header, dst, tag);
  PendingWork payload_sent = group.send_async(tensor.contiguous(), dst, tag);
  return PendingWork([header_sent, payload_sent]() mutable {
    header_sent.wait();
    payload_sent.wait();
  });
}

torch::Tensor recv_tensor(ProcessGroupHandle& group, int src, int tag, torch::Device device) {
  const std::string where = "pipeline receive from rank " + std::to_string(src);
  torch::Tensor header = torch::empty({kHeaderLength}, torch::kLong);
  group.recv(header, src, tag);
  const auto* h = header.data_ptr<int64_t>();
  check_input(h[0] >= 0 && h[0] < static_cast<int64_t>(c10::ScalarType::NumOptions) &&
                  h[1] >= 0 && h[1] <= kMaxDims,
              "a malformed header (dtype " + std::to_string(h[0]) + ", " + std::to_string(h[1]) +
                  " dims): the peer sent something other than send_tensor's message",
              where);
  std::vector<int64_t> sizes(h + 2, h + 2 + h[1]);
  for (int64_t size : sizes) check_input(size >= 0, "a negative size in the header", where);
  torch::Tensor payload = torch::empty(
      sizes, torch::TensorOptions().dtype(static_cast<c10::ScalarType>(h[0])).device(device));
  group.recv(payload, src, tag);
  return payload;
}

}  // namespace aspen::parallel
