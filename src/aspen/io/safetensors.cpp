#include "aspen/io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <unordered_map>

#include "aspen/io/imports.h"
#include "aspen/io/safetensors_header.h"
#include "aspen/io/strict_json.h"
#include "aspen/util/error.h"

namespace aspen::io {

// The mapped file plus its validated header. Shared by the reader and by every
// zero-copy tensor (through its deleter), so the mapping outlives whichever goes last.
struct SafetensorsReader::Mapping {
  std::string path;
  void* base = MAP_FAILED;
  uint64_t file_size = 0;
  const uint8_t* buffer = nullptr;  // start of the data buffer inside the mapping
  std::vector<std::string> names;
  std::unordered_map<std::string, SafetensorsEntry> entries;
  std::map<std::string, std::string> metadata;

  ~Mapping() {
    if (base != MAP_FAILED) munmap(base, file_size);
  }
};

namespace {

std::string errno_text() {
  return std::strerror(errno);
}

uint64_t read_u64_le(const uint8_t* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

std::string u64_le(uint64_t value) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((value >> (8 * i)) & 0xFF);
  return bytes;
}

}  // namespace

SafetensorsReader::SafetensorsReader(const std::string& path)
    : mapping_(std::make_shared<Mapping>()) {
  Mapping& m = *mapping_;
  m.path = path;

  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open for reading: " + errno_text(), path);
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    throw Error("not a regular file", path);
  }
  m.file_size = static_cast<uint64_t>(info.st_size);
  if (m.file_size < 8) {
    ::close(fd);
    throw Error(
        "file is " + std::to_string(m.file_size) + " bytes, shorter than the 8-byte header length",
        path, "not a safetensors file, or truncated");
  }
  // MAP_PRIVATE + PROT_WRITE: an in-place op on a zero-copy tensor gets a private
  // copy-on-write page instead of a segfault, and never touches the file.
  m.base = ::mmap(nullptr, m.file_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  const int mmap_errno = errno;
  ::close(fd);
  if (m.base == MAP_FAILED)
    throw Error("mmap failed: " + std::string(std::strerror(mmap_errno)), path);

  const auto* bytes = static_cast<const uint8_t*>(m.base);
  const uint64_t header_size = read_u64_le(bytes);
  if (header_size > kMaxSafetensorsHeaderBytes) {
    throw Error("header length " + std::to_string(header_size) + " exceeds the limit of " +
                    std::to_string(kMaxSafetensorsHeaderBytes) + " bytes",
                path, "not a safetensors file, or corrupt");
  }
  if (header_size > m.file_size - 8) {
    throw Error("header length " + std::to_string(header_size) + " exceeds the file size " +
                    std::to_string(m.file_size),
                path, "truncated file?");
  }
  const uint64_t buffer_size = m.file_size - 8 - header_size;
  SafetensorsHeader header = parse_safetensors_header(reinterpret_cast<const char*>(bytes + 8),
                                                      header_size, buffer_size, path);
  m.buffer = bytes + 8 + header_size;
  m.metadata = std::move(header.metadata);
  for (SafetensorsEntry& entry : header.tensors) {
    m.names.push_back(entry.name);
    std::string name = entry.name;
    m.entries.emplace(std::move(name), std::move(entry));
  }
}

const std::vector<std::string>& SafetensorsReader::names() const {
  return mapping_->names;
}

bool SafetensorsReader::contains(const std::string& name) const {
  return mapping_->entries.count(name) > 0;
}

torch::Tensor SafetensorsReader::tensor(const std::string& name) const {
  const auto it = mapping_->entries.find(name);
  if (it == mapping_->entries.end()) throw Error("no tensor named \"" + name + "\"", path());
  const SafetensorsEntry& entry = it->second;
  if (!entry.dtype->torch_type) {
    throw Error(
        "tensor \"" + name + "\" has dtype " + entry.dtype->name + ", which torch cannot load",
        path(), "convert the checkpoint to F32, BF16 or F16");
  }
  const torch::ScalarType type = *entry.dtype->torch_type;
  const auto options = torch::TensorOptions().dtype(type).device(torch::kCPU);
  const uint64_t nbytes = entry.end - entry.begin;
  if (nbytes == 0) return torch::empty(entry.shape, options);

  auto* data = const_cast<uint8_t*>(mapping_->buffer + entry.begin);
  if (type == torch::kBool) {
    // Any byte but 0/1 in a torch bool is undefined behaviour, so check first.
    for (uint64_t i = 0; i < nbytes; ++i) {
      if (data[i] > 1) {
        throw Error("tensor \"" + name + "\" (BOOL) holds byte " + std::to_string(data[i]) +
                        " at element " + std::to_string(i),
                    path(), "BOOL elements must be 0 or 1");
      }
    }
  }
  const auto element_size = static_cast<uintptr_t>(entry.dtype->bits / 8);
  if (reinterpret_cast<uintptr_t>(data) % element_size == 0) {
    std::shared_ptr<Mapping> keep_alive = mapping_;
    return torch::from_blob(
        data, entry.shape, [keep_alive](void*) mutable { keep_alive.reset(); }, options);
  }
  // Misaligned (the writer ordered tensors without regard to alignment): copy.
  torch::Tensor copy = torch::empty(entry.shape, options);
  std::memcpy(copy.data_ptr(), data, nbytes);
  return copy;
}

const std::map<std::string, std::string>& SafetensorsReader::metadata() const {
  return mapping_->metadata;
}

const std::string& SafetensorsReader::path() const {
  return mapping_->path;
}

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  for (const auto& [key, value] : metadata) {
    if (!is_valid_utf8(key.data(), key.size()) || !is_valid_utf8(value.data(), value.size())) {
      throw Error("metadata entry \"" + key + "\" is not valid UTF-8", path);
    }
  }
  std::vector<SafetensorsEntry> entries;
  std::vector<torch::Tensor> contiguous;
  std::unordered_map<std::string, bool> seen;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (!is_valid_utf8(name.data(), name.size())) {
      throw Error("tensor name is not valid UTF-8", path);
    }
    if (name == "__metadata__")
      throw Error("\"__metadata__\" is reserved, not a tensor name", path);
    if (!seen.emplace(name, true).second)
      throw Error("duplicate tensor name \"" + name + "\"", path);
    if (!tensor.defined()) throw Error("tensor \"" + name + "\" is undefined", path);
    SafetensorsEntry entry;
    entry.name = name;
    entry.dtype = find_safetensors_dtype(tensor.scalar_type());
    if (entry.dtype == nullptr) {
      throw Error("tensor \"" + name + "\" has dtype " +
                      std::string(c10::toString(tensor.scalar_type())) +
                      ", which safetensors cannot store",
                  path);
    }
    torch::Tensor cpu = tensor.detach().to(torch::kCPU).contiguous();
    entry.shape = cpu.sizes().vec();
    entry.begin = offset;
    offset += static_cast<uint64_t>(cpu.nbytes());
    entry.end = offset;
    entries.push_back(std::move(entry));
    contiguous.push_back(std::move(cpu));
  }
  const std::string header = serialize_safetensors_header(entries, metadata);

  // Streamed rather than via write_file_atomic: a checkpoint can be many GB and
  // must not be assembled in memory first. Same temp-then-rename atomicity.
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot open for writing: " + errno_text(), temp);
    const std::string length = u64_le(header.size());
    out.write(length.data(), 8);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    for (const torch::Tensor& t : contiguous) {
      out.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
    }
    out.flush();
    if (!out) {
      out.close();
      std::remove(temp.c_str());
      throw Error("write failed (disk full?)", temp);
    }
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string reason = errno_text();
    std::remove(temp.c_str());
    throw Error("cannot rename into place: " + reason, path);
  }
}

std::map<std::string, torch::Tensor> load_safetensors(const std::string& path) {
  SafetensorsReader reader(path);
  std::map<std::string, torch::Tensor> tensors;
  for (const std::string& name : reader.names()) tensors.emplace(name, reader.tensor(name));
  return tensors;
}

}  // namespace aspen::io
