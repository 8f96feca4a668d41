#include "aspen/parallel/device.h"

#include <torch/cuda.h>

#include <algorithm>
#include <cctype>

#include "aspen/parallel/imports.h"
#include "aspen/util/error.h"

namespace aspen::parallel {

std::string DeviceSpec::text() const {
  if (!cuda) return "cpu";
  return index ? "cuda:" + std::to_string(*index) : "cuda";
}

DeviceSpec parse_device_spec(const std::string& text, const std::string& where) {
  if (text == "cpu") return {};
  if (text == "cuda") return {true, std::nullopt};
  const std::string prefix = "cuda:";
  const std::string digits = text.rfind(prefix, 0) == 0 ? text.substr(prefix.size()) : "";
  // 1-4 decimal digits: a device index, never a sign, space or suffix.
  if (!digits.empty() && digits.size() <= 4 &&
      std::all_of(digits.begin(), digits.end(),
                  [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; })) {
    return {true, std::stoi(digits)};
  }
  throw Error("unknown device \"" + text + "\"", where, "use cpu, cuda or cuda:N");
}

int cuda_device_count() {
  return torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
}

torch::Device resolve_device(const DeviceSpec& spec, int local_rank, const std::string& where) {
  if (!spec.cuda) return torch::kCPU;
  const int count = cuda_device_count();
  if (count == 0) {
    throw Error("device " + spec.text() + " requested but no CUDA device is usable", where,
                "run on a machine with an NVIDIA GPU and driver, or use cpu; "
                "`aspen version --json` shows what this build sees");
  }
  const int index = spec.index.value_or(local_rank);
  if (index < 0 || index >= count) {
    throw Error("device cuda:" + std::to_string(index) + " does not exist (" +
                    std::to_string(count) + " CUDA device" + (count == 1 ? "" : "s") + ")",
                where, spec.index ? "" : "plain cuda means cuda:LOCAL_RANK");
  }
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
}

torch::Device device_from_option(const std::string& text, const std::string& where) {
  return resolve_device(parse_device_spec(text, where), 0, where);
}

}  // namespace aspen::parallel
