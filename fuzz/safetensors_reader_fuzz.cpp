// The whole safetensors reader (io/safetensors.h): the input is written to a file
// (a memfd, so nothing touches the disk), mapped and opened, and every tensor is
// read. Checks: open and read work or raise aspen::Error; a tensor that reads has
// the bytes its header declares.
#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "aspen/io/safetensors.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memfd_create("fuzz.safetensors", 0);
  if (fd < 0) aspen::fuzz::defect("memfd_create failed");
  size_t written = 0;
  while (written < size) {
    const ssize_t n = write(fd, data + written, size - written);
    if (n <= 0) aspen::fuzz::defect("write to memfd failed");
    written += static_cast<size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  ASPEN_FUZZ_CONTRACT({
    aspen::io::SafetensorsReader reader(path);
    for (const std::string& name : reader.names()) {
      ASPEN_FUZZ_CONTRACT({
        const torch::Tensor tensor = reader.tensor(name);
        aspen::fuzz::require(tensor.is_contiguous(), "a read tensor is contiguous");
        // Touch every byte: an out-of-bounds view would be an ASan report here.
        const auto* bytes = static_cast<const uint8_t*>(tensor.data_ptr());
        uint64_t sum = 0;
        for (size_t i = 0; i < tensor.nbytes(); ++i) sum += bytes[i];
        aspen::fuzz::require(sum <= 255 * tensor.nbytes(), "byte sum");
      });
    }
  });
  close(fd);
  return 0;
}
