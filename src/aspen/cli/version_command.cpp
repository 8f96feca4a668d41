// `aspen version [--json]`: what this build is and what it sees — Aspen's version, the
// torch it was built against, whether CUDA was compiled in and is usable, the devices,
// and the BLAS behind torch's CPU matmuls. It is what a user pastes into a bug report.
#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>

#include "aspen/cli/command.h"
#include "aspen/cli/imports.h"
#include "aspen/parallel/device.h"

namespace aspen::cli {
// Named, not anonymous: the CLI is a unity build (one namespace per subcommand file).
namespace version_command {

// "BLAS_INFO=mkl" in torch's build configuration: the library behind CPU GEMMs.
std::string blas_name() {
  static const std::regex blas("BLAS_INFO=([^,\\s]+)");
  const std::string config = at::show_config();
  std::smatch match;
  return std::regex_search(config, match, blas) ? match[1].str() : "unknown";
}

nlohmann::json devices_json() {
  nlohmann::json devices = nlohmann::json::array({{{"type", "cpu"}}});
  const int count = cuda_device_count();
  for (int i = 0; i < count; ++i) {
    const cudaDeviceProp* props = at::cuda::getDeviceProperties(i);
    devices.push_back(
        {{"type", "cuda"},
         {"index", i},
         {"name", props->name},
         {"capability", std::to_string(props->major) + "." + std::to_string(props->minor)},
         {"memory_gib", static_cast<double>(props->totalGlobalMem) / (1 << 30)}});
  }
  return devices;
}

nlohmann::json version_json() {
  return {{"aspen", ASPEN_VERSION},
          {"torch", TORCH_VERSION},
          // Built: libtorch_cuda is linked and registered its hooks (at::hasCUDA() would
          // answer whether a device is usable, which is cuda_available).
          {"cuda_compiled", at::detail::getCUDAHooks().isBuilt()},
          {"cuda_available", torch::cuda::is_available()},
          {"devices", devices_json()},
          {"blas", blas_name()},
          {"mkldnn", at::hasMKLDNN()},
          {"cxx11_abi", static_cast<bool>(_GLIBCXX_USE_CXX11_ABI)}};
}

void setup(CLI::App& root) {
  auto json = std::make_shared<bool>(false);
  CLI::App* command = root.add_subcommand(
      "version", "Aspen, torch, CUDA and BLAS of this build (paste into bug reports)");
  command->add_flag("--json", *json, "one JSON object");
  on_run(command, [json] {
    const nlohmann::json v = version_json();
    if (*json) {
      std::cout << v.dump() << '\n';
      return 0;
    }
    std::cout << "aspen " << v["aspen"].get<std::string>() << "\ntorch "
              << v["torch"].get<std::string>() << " (CUDA "
              << (v["cuda_compiled"].get<bool>() ? "compiled in" : "not compiled") << ", "
              << (v["cuda_available"].get<bool>() ? "available" : "not available") << ")\nblas "
              << v["blas"].get<std::string>() << "\ndevices";
    for (const auto& d : v["devices"]) {
      std::cout << ' ' << d["type"].get<std::string>();
      if (d.contains("index"))
        std::cout << ':' << d["index"].get<int>() << " (" << d["name"].get<std::string>() << ')';
    }
    std::cout << '\n';
    return 0;
  });
}

ASPEN_REGISTER_COMMAND(95, setup);

}  // namespace version_command
}  // namespace aspen::cli
