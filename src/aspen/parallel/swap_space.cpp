#include "aspen/parallel/swap_space.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <unordered_map>
#include <unordered_set>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "aspen/parallel/imports.h"
#include "aspen/util/error.h"
#include "aspen/util/log.h"

namespace aspen::parallel {
namespace {

// Page-aligned offsets: harmless for buffered I/O and keep the file usable with
// O_DIRECT should the page cache ever need bypassing.
constexpr int64_t kAlignment = 4096;
// Linux transfers at most ~2 GiB per read/write call; stay well under it.
constexpr int64_t kMaxChunk = int64_t{1} << 30;

int64_t align_up(int64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

std::string errno_text() { return std::strerror(errno); }

std::string default_directory() {
  try {
    return std::filesystem::temp_directory_path().string();
  } catch (const std::filesystem::filesystem_error& e) {
    throw Error(std::string("no usable temp directory: ") + e.what(), "TMPDIR",
                "set SwapSpaceOptions::directory");
  }
}

// On tmpfs/ramfs the "file" is RAM: swapping there frees nothing.
void warn_if_memory_backed(const std::string& directory) {
  struct statfs fs;
  if (statfs(directory.c_str(), &fs) != 0) return;
  if (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC) {
    log_warn("swap directory ", directory,
             " is memory-backed (tmpfs): swapped tensors will still occupy RAM");
  }
}

// `what`: the tensor being transferred, for the message; `path`: the file, as the input.
void write_all(int fd, const char* data, int64_t n, int64_t offset, const std::string& what,
               const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, data, std::min(n, kMaxChunk), offset);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      throw Error("cannot write " + what + " to the swap file: " +
                      (w < 0 ? errno_text() : std::string("no progress")),
                  path, "free disk space or choose another swap directory");
    }
    data += w;
    offset += w;
    n -= w;
  }
}

void read_all(int fd, char* data, int64_t n, int64_t offset, const std::string& what,
              const std::string& path) {
  while (n > 0) {
    const ssize_t r = ::pread(fd, data, std::min(n, kMaxChunk), offset);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw Error("cannot read " + what + " from the swap file: " + errno_text(), path);
    if (r == 0) {
      throw Error("swap file ends before " + what + " does", path,
                  "was it truncated or replaced by another process?");
    }
    data += r;
    offset += r;
    n -= r;
  }
}

// The whole storage as a flat uint8 tensor (no copy).
torch::Tensor storage_bytes(const c10::Storage& storage) {
  const int64_t n = static_cast<int64_t>(storage.nbytes());
  return torch::empty({0}, torch::TensorOptions().dtype(torch::kUInt8).device(storage.device()))
      .set_(storage, 0, {n}, {1});
}

}  // namespace

SwapSpace::SwapSpace(SwapSpaceOptions options) : options_(std::move(options)) {
  if (options_.directory.empty()) options_.directory = default_directory();
  std::string pattern =
      options_.directory + "/aspen-swap-" + std::to_string(::getpid()) + "-XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  fd_ = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd_ < 0) {
    throw Error("cannot create a swap file in directory: " + errno_text(), options_.directory,
                "point the swap directory at a writable local disk");
  }
  path_ = name.data();
  warn_if_memory_backed(options_.directory);
}

SwapSpace::~SwapSpace() {
  if (swapped_out_) {
    // The owner still holds these tensors (an optimizer outliving a failed rollout):
    // dropping their bytes here would corrupt it silently.
    try {
      swap_in();
    } catch (const std::exception& e) {
      log_error("SwapSpace: restoring swapped tensors on destruction failed: ", e.what());
    }
  }
  if (fd_ >= 0) ::close(fd_);
  if (!path_.empty()) ::unlink(path_.c_str());
}

int64_t SwapSpace::swapped_bytes() const {
  int64_t total = 0;
  for (const Block& b : blocks_) total += b.nbytes;
  return total;
}

int64_t SwapSpace::file_bytes() const {
  int64_t total = 0;
  for (const Block& b : blocks_) total += b.device.is_cpu() ? b.nbytes : 0;
  return total;
}

void SwapSpace::swap_out(const NamedTensors& tensors) {
  check_input(!swapped_out_, "swap_out() while already swapped out", path_,
              "call swap_in() first");
  std::vector<Block> blocks;
  std::vector<Entry> entries;
  std::unordered_map<const c10::StorageImpl*, size_t> block_of;
  std::unordered_set<const c10::TensorImpl*> seen;
  std::vector<int64_t> impls_in_set;  // per block: tensor objects of the set viewing it
  for (const auto& [name, t] : tensors) {
    if (!t.defined()) continue;
    if (!seen.insert(t.unsafeGetTensorImpl()).second) continue;  // one object, two names
    check_input(t.layout() == torch::kStrided && t.has_storage(),
                "only dense (strided) tensors with a storage can be swapped", name);
    check_input(t.unsafeGetTensorImpl()->allow_tensor_metadata_change(),
                "its storage cannot be replaced (made by .detach() or .data)", name,
                "swap the tensor it was detached from");
    auto [it, added] = block_of.emplace(t.storage().unsafeGetStorageImpl(), blocks.size());
    if (added) {
      Block b;
      b.name = name;
      b.device = t.device();
      b.nbytes = static_cast<int64_t>(t.storage().nbytes());
      blocks.push_back(std::move(b));
      impls_in_set.push_back(0);
    }
    ++impls_in_set[it->second];
    entries.push_back(Entry{name, t, it->second, t.storage_offset(), t.sizes().vec(),
                            t.strides().vec()});
  }
  // A storage's strong references are the tensor objects viewing it; more of them than
  // the set holds means a view outside the set, which would keep the bytes alive and
  // stop seeing them after swap_in.
  for (const Entry& e : entries) {
    const int64_t users = static_cast<int64_t>(e.tensor.storage().use_count());
    const int64_t inside = impls_in_set[e.block];
    check_input(users <= inside,
                "its storage is also used by " + std::to_string(users - inside) +
                    " tensor(s) outside the swapped set",
                e.name, "swap every tensor that views this storage together");
  }

  // Copy every block out before releasing anything, so a failure leaves all tensors intact.
  int64_t file_size = 0;
  for (Block& b : blocks) {
    if (b.device.is_cpu()) {
      b.file_offset = file_size;
      file_size += align_up(b.nbytes);
    }
  }
  blocks_ = std::move(blocks);
  entries_ = std::move(entries);
  try {
    if (file_size > 0) {
      // Reserve the space first: "disk full" then fails here, before any write.
      if (::fallocate(fd_, 0, 0, file_size) != 0 && errno != EOPNOTSUPP && errno != ENOSYS) {
        throw Error("cannot reserve " + std::to_string(file_size) +
                        " bytes for the swap file: " + errno_text(),
                    path_, "free disk space or choose another swap directory");
      }
      write_file_blocks();
    }
    for (Entry& e : entries_) {
      Block& b = blocks_[e.block];
      if (b.device.is_cpu() || b.host.defined()) continue;
      torch::Tensor device_bytes = storage_bytes(e.tensor.storage());
      auto host_options = torch::TensorOptions().dtype(torch::kUInt8);
      if (options_.pin_memory) {
        try {
          b.host = torch::empty({b.nbytes}, host_options.pinned_memory(true));
        } catch (const c10::Error& err) {
          log_warn("SwapSpace: pinned host memory unavailable, using pageable: ",
                   err.what_without_backtrace());
          options_.pin_memory = false;
        }
      }
      if (!b.host.defined()) b.host = torch::empty({b.nbytes}, host_options);
      b.host.copy_(device_bytes);  // blocking: the bytes are on the host when this returns
    }
  } catch (...) {
    blocks_.clear();
    entries_.clear();
    release_file_space();
    throw;
  }

  torch::NoGradGuard no_grad;  // set_ on a leaf that requires grad is otherwise refused
  for (Entry& e : entries_) e.tensor.set_();  // same object, empty storage: bytes freed
  swapped_out_ = true;
#if defined(__GLIBC__)
  // Storages below glibc's mmap threshold were freed into the heap; hand those pages back.
  if (file_size > 0) ::malloc_trim(0);
#endif
}

void SwapSpace::write_file_blocks() {
  std::vector<bool> written(blocks_.size(), false);
  for (const Entry& e : entries_) {
    const Block& b = blocks_[e.block];
    if (!b.device.is_cpu() || written[e.block]) continue;
    written[e.block] = true;
    const auto* data = static_cast<const char*>(e.tensor.storage().data_ptr().get());
    write_all(fd_, data, b.nbytes, b.file_offset, b.name, path_);
  }
}

void SwapSpace::read_block(const Block& b, torch::Tensor& bytes) const {
  if (b.device.is_cpu()) {
    bytes = torch::empty({b.nbytes}, torch::TensorOptions().dtype(torch::kUInt8));
    read_all(fd_, reinterpret_cast<char*>(bytes.data_ptr<uint8_t>()), b.nbytes, b.file_offset,
             b.name, path_);
  } else {
    bytes = torch::empty({b.nbytes}, torch::TensorOptions().dtype(torch::kUInt8).device(b.device));
    bytes.copy_(b.host);
  }
}

void SwapSpace::release_file_space() {
  // Truncation drops the file's disk blocks and its page-cache pages; errors here only
  // waste disk until destruction, so they are not worth failing a swap over.
  if (ftruncate(fd_, 0) != 0) log_warn("SwapSpace: cannot truncate ", path_, ": ", errno_text());
}

void SwapSpace::swap_in() {
  if (!swapped_out_) return;
  for (const Entry& e : entries_) {
    check_input(e.tensor.storage().nbytes() == 0, "was modified while swapped out", e.name,
                "do not use or resize swapped-out tensors before swap_in()");
  }
  // Read everything before touching any tensor, so a failure leaves them all swapped out.
  std::vector<torch::Tensor> bytes(blocks_.size());
  for (size_t i = 0; i < blocks_.size(); ++i) read_block(blocks_[i], bytes[i]);

  torch::NoGradGuard no_grad;
  for (Entry& e : entries_) {
    e.tensor.set_(bytes[e.block].storage(), e.storage_offset, e.sizes, e.strides);
  }
  blocks_.clear();
  entries_.clear();
  swapped_out_ = false;
  release_file_space();
}

}  // namespace aspen::parallel
