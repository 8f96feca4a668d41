// Device choice: the one place a "cpu" | "cuda" | "cuda:N" string from a config key or a
// --device option becomes a torch::Device.
//
// Two steps, so a config is validated before any work and the hardware is asked only
// when it is used:
//   parse_device_spec("cuda:1", "train.device")  -> DeviceSpec; a malformed string is an
//       aspen::Error naming the key. No CUDA query: a config written for a GPU machine
//       parses (and round-trips) on a CPU one.
//   resolve_device(spec, local_rank, where)      -> torch::Device; plain "cuda" means
//       cuda:LOCAL_RANK (torchrun's convention: one GPU per rank on a node). CUDA
//       requested where none is usable, or an index past the device count, is an
//       aspen::Error naming the key and how many devices there are.
//
// Everything else in Aspen follows the device of the tensors it is given (model weights,
// KV cache); no other code reads these strings.
#pragma once

#include <torch/types.h>

#include <optional>
#include <string>

#include "aspen/parallel/imports.h"

namespace aspen::parallel {

struct DeviceSpec {
  bool cuda = false;
  std::optional<int> index;  // cuda only; absent: the rank's local device

  // "cpu", "cuda" or "cuda:N": the text parse_device_spec reads back.
  std::string text() const;
  bool operator==(const DeviceSpec& other) const {
    return cuda == other.cuda && index == other.index;
  }
};

DeviceSpec parse_device_spec(const std::string& text, const std::string& where);

// The number of CUDA devices this process can use (0 without a GPU or driver).
int cuda_device_count();

torch::Device resolve_device(const DeviceSpec& spec, int local_rank, const std::string& where);

// parse + resolve for the single-process commands (generate, logprobs, benches).
torch::Device device_from_option(const std::string& text, const std::string& where);

}  // namespace aspen::parallel
