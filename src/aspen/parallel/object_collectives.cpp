#include "aspen/parallel/object_collectives.h"

#include <algorithm>
#include <cstring>

#include "aspen/parallel/imports.h"

namespace aspen::parallel {

void broadcast_bytes(ProcessGroupHandle& group, std::string& bytes, int root) {
  torch::Tensor size = torch::tensor({static_cast<int64_t>(bytes.size())}, torch::kInt64);
  group.broadcast(size, root);
  const int64_t n = size.item<int64_t>();
  torch::Tensor payload = torch::empty({std::max<int64_t>(n, 1)}, torch::kUInt8);
  if (group.rank() == root && n > 0) std::memcpy(payload.data_ptr<uint8_t>(), bytes.data(), n);
  group.broadcast(payload, root);
  if (group.rank() != root) {
    bytes.assign(reinterpret_cast<const char*>(payload.data_ptr<uint8_t>()),
                 static_cast<size_t>(n));
  }
}

void broadcast_json(ProcessGroupHandle& group, nlohmann::json& value, int root) {
  std::string text = group.rank() == root ? value.dump() : std::string();
  broadcast_bytes(group, text, root);
  if (group.rank() != root) value = nlohmann::json::parse(text);
}

std::vector<double> all_gather_doubles(ProcessGroupHandle& group,
                                       const std::vector<double>& values) {
  // Lengths first, then every rank's values padded to the longest.
  const std::vector<torch::Tensor> lengths =
      group.all_gather(torch::tensor({static_cast<int64_t>(values.size())}, torch::kInt64));
  int64_t longest = 1;
  for (const auto& l : lengths) longest = std::max(longest, l.item<int64_t>());
  torch::Tensor padded = torch::zeros({longest}, torch::kFloat64);
  if (!values.empty()) {
    std::memcpy(padded.data_ptr<double>(), values.data(), values.size() * sizeof(double));
  }
  const std::vector<torch::Tensor> gathered = group.all_gather(padded);
  std::vector<double> all;
  for (size_t r = 0; r < gathered.size(); ++r) {
    const double* data = gathered[r].data_ptr<double>();
    all.insert(all.end(), data, data + lengths[r].item<int64_t>());
  }
  return all;
}

}  // namespace aspen::parallel
