#include "aspen/util/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "aspen/util/error.h"

namespace aspen {
namespace {

namespace fs = std::filesystem;

// The kernel's own limit on symlinks followed in one lookup (ELOOP past it).
constexpr int kMaxSymlinkHops = 40;

std::string errno_text(int error) { return std::strerror(error); }

// What an existing path is, for an error ("... is a character device").
std::string kind_of(mode_t mode) {
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO (opening it blocks until a reader comes)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISDIR(mode)) return "a directory";
  return "not a regular file";
}

// Where a write to `path` lands: the final target of a symlink chain at `path` (each
// relative target read against its link's directory, as the kernel does), or `path`.
struct OutputTarget {
  fs::path path;
  bool exists = false;
  struct stat status = {};  // when it exists
};

OutputTarget follow_symlinks(const std::string& path, const std::string& input) {
  fs::path current(path);
  for (int hops = 0;; ++hops) {
    OutputTarget target;
    target.path = current;
    if (::lstat(current.c_str(), &target.status) != 0) {
      // A new name (or a dangling link's target); a missing directory on the way is
      // for the caller's directory check to name.
      if (errno == ENOENT) return target;
      throw Error("cannot be examined: " + errno_text(errno), input);
    }
    target.exists = true;
    if (!S_ISLNK(target.status.st_mode)) return target;
    check_input(hops < kMaxSymlinkHops,
                "is a chain of more than " + std::to_string(kMaxSymlinkHops) +
                    " symlinks (a loop?)",
                input);
    std::error_code error;
    const fs::path link = fs::read_symlink(current, error);
    if (error) throw Error("cannot read the symlink: " + error.message(), input);
    current = link.is_absolute() ? link : current.parent_path() / link;
  }
}

// "is a character device" or, through a symlink, "is a symlink to T, a character device".
std::string what_it_is(const std::string& path, const OutputTarget& target) {
  const std::string kind = kind_of(target.status.st_mode);
  if (target.path == fs::path(path)) return "is " + kind;
  return "is a symlink to " + target.path.string() + ", " + kind;
}

fs::path directory_of(const fs::path& file) {
  return file.has_parent_path() ? file.parent_path() : fs::path(".");
}

// Files can be created in `dir` (the temporary file and the rename need that): probed
// by creating and removing one, because as root every permission bit passes and only
// the filesystem (read-only, /proc) says no.
void check_can_create_in(const fs::path& dir, const std::string& input) {
  struct stat status = {};
  if (::stat(dir.c_str(), &status) != 0) {
    throw Error("its directory " + dir.string() + " cannot be used: " + errno_text(errno), input,
                "create the directory first");
  }
  check_input(S_ISDIR(status.st_mode), "its directory " + dir.string() + " is not a directory",
              input);
  static std::atomic<int> probes{0};
  const fs::path probe = dir / (".aspen-write-probe-" + std::to_string(::getpid()) + "-" +
                                std::to_string(probes++));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw Error("no file can be created in its directory " + dir.string() + ": " +
                    errno_text(errno),
                input);
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

// Opens `temp` as a new file: O_EXCL, so whatever sits under that name (a FIFO, a
// device, a symlink) is never opened or written through. A regular file there is a
// temporary left by a crash and is replaced.
int open_new_temp(const std::string& temp) {
  for (int attempt = 0;; ++attempt) {
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) return fd;
    const int error = errno;
    struct stat status = {};
    if (error == EEXIST && attempt == 0 && ::lstat(temp.c_str(), &status) == 0 &&
        S_ISREG(status.st_mode)) {
      ::unlink(temp.c_str());
      continue;
    }
    if (error == EEXIST) {
      throw Error("is in the way of the temporary file: it is " +
                      (S_ISLNK(status.st_mode) ? std::string("a symlink")
                                               : kind_of(status.st_mode)),
                  temp, "remove it");
    }
    throw Error("cannot open for writing: " + errno_text(error), temp);
  }
}

}  // namespace

std::string read_file(const std::string& path) {
  // A directory opens as an empty stream on Linux: it would read as an empty file.
  std::error_code ignored;
  check_input(!std::filesystem::is_directory(path, ignored), "is a directory, not a file", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(std::string("cannot open for reading: ") + std::strerror(errno), path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw Error("read failed", path);
  return buffer.str();
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  // The rename replaces the directory entry it is given: renaming onto a symlink would
  // replace the link (its target never written), onto /dev/full the device node.
  const OutputTarget target = follow_symlinks(path, path);
  if (target.exists) {
    check_input(S_ISREG(target.status.st_mode),
                what_it_is(path, target) + ", not a regular file: refusing to replace it", path,
                "name a regular file or a new file");
  }
  const std::string final_path = target.path.string();
  const std::string temp = final_path + ".tmp";
  const int fd = open_new_temp(temp);
  auto fail = [&](const std::string& problem) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw Error(problem, temp);
  };
  if (target.exists) ::fchmod(fd, target.status.st_mode & 07777);
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("write failed: " + errno_text(errno));
    written += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    throw Error("write failed: " + errno_text(error), temp);
  }
  if (std::rename(temp.c_str(), final_path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    throw Error("cannot rename into place: " + errno_text(error), final_path);
  }
}

std::string check_output_file(const std::string& path, const std::string& what) {
  const std::string input = what + " " + path;
  check_input(!path.empty(), "is empty", what, "name a file");
  const OutputTarget target = follow_symlinks(path, input);
  if (target.exists) {
    check_input(S_ISREG(target.status.st_mode),
                what_it_is(path, target) + ", not a regular file", input,
                "an output is written to a temporary file and renamed over the old one: name a "
                "regular file or a new file in a writable directory");
    if (::access(target.path.c_str(), W_OK) != 0) {
      throw Error("cannot be written: " + errno_text(errno), input);
    }
  } else {
    check_input(!target.path.filename().empty(), "names a directory, not a file", input);
  }
  check_can_create_in(directory_of(target.path), input);
  return target.path.string();
}

void check_output_directory(const std::string& path, const std::string& what) {
  const std::string input = what + " " + path;
  check_input(!path.empty(), "is empty", what, "name a directory");
  std::error_code error;
  // fs::status follows symlinks: a link to a directory is that directory.
  const fs::file_status status = fs::status(path, error);
  if (fs::exists(status)) {
    check_input(fs::is_directory(status), "exists and is not a directory", input,
                "name a directory (or a new one)");
  } else {
    fs::create_directories(path, error);
    if (error) throw Error("cannot be created: " + error.message(), input);
  }
  check_can_create_in(fs::path(path), input);
}

void check_input_directory(const std::string& path, const std::string& what,
                           const std::string& hint) {
  check_input(!path.empty(), "is empty", what, hint);
  const std::string input = what + " " + path;
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  check_input(fs::exists(status), "does not exist", input, hint);
  check_input(fs::is_directory(status), "is not a directory", input, hint);
}

}  // namespace aspen
