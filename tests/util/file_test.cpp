// Output paths: a device, FIFO or socket is never replaced by a file, a symlink's target
// is written and the link kept, and check_output_file refuses what write_file_atomic
// would not write, naming the key, before any work.
#include "aspen/util/file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "aspen/util/error.h"

namespace aspen {
namespace {

namespace fs = std::filesystem;

// A fresh, empty scratch directory per test.
fs::path scratch(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("aspen_file_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// The aspen::Error's text of `action`, "" when it did not throw.
template <typename F>
std::string error_of(F action) {
  try {
    action();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool is_fifo_node(const fs::path& path) { return fs::is_fifo(fs::symlink_status(path)); }

TEST(OutputFile, ACharacterDeviceIsRefusedNamingTheKeyAndNeverReplaced) {
  const fs::path dir = scratch("chardev");
  const fs::path device = dir / "full";
  // A copy of /dev/full (1, 7): only root may make one; CI and this machine run as root.
  if (::mknod(device.c_str(), S_IFCHR | 0666, makedev(1, 7)) != 0) {
    GTEST_SKIP() << "mknod needs root";
  }
  const std::string check = error_of([&] { check_output_file(device.string(), "logging.trace"); });
  EXPECT_NE(check.find("logging.trace " + device.string()), std::string::npos) << check;
  EXPECT_NE(check.find("is a character device"), std::string::npos) << check;

  const std::string write = error_of([&] { write_file_atomic(device.string(), "{}"); });
  EXPECT_NE(write.find("is a character device"), std::string::npos) << write;
  EXPECT_TRUE(fs::is_character_file(fs::symlink_status(device)));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1)
      << "nothing but the device is left in " << dir;
}

TEST(OutputFile, AFifoIsRefusedWithoutBlockingAndNeverReplaced) {
  const fs::path dir = scratch("fifo");
  const fs::path fifo = dir / "trace.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Opening a FIFO for writing would block here until a reader came: the test would hang.
  const std::string check = error_of([&] { check_output_file(fifo.string(), "--trace"); });
  EXPECT_NE(check.find("--trace " + fifo.string()), std::string::npos) << check;
  EXPECT_NE(check.find("is a FIFO"), std::string::npos) << check;
  const std::string write = error_of([&] { write_file_atomic(fifo.string(), "{}"); });
  EXPECT_NE(write.find("is a FIFO"), std::string::npos) << write;
  EXPECT_TRUE(is_fifo_node(fifo));
}

TEST(OutputFile, ASymlinkHasItsTargetWrittenAndStaysALink) {
  const fs::path dir = scratch("symlink");
  fs::create_directories(dir / "real");
  const fs::path target = dir / "real" / "trace.json";
  write_file_atomic(target.string(), "old");
  const fs::path link = dir / "trace.json";
  fs::create_symlink("real/trace.json", link);  // relative: read against the link's directory

  EXPECT_EQ(check_output_file(link.string(), "logging.trace"), target.string());
  write_file_atomic(link.string(), "new");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(read_file(target.string()), "new");
  EXPECT_FALSE(fs::exists(target.string() + ".tmp"));
}

TEST(OutputFile, ADanglingSymlinkToANewNameCreatesItsTarget) {
  const fs::path dir = scratch("dangling");
  const fs::path target = dir / "new.json";
  const fs::path link = dir / "link.json";
  fs::create_symlink(target, link);
  EXPECT_EQ(check_output_file(link.string(), "--out"), target.string());
  write_file_atomic(link.string(), "x");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(read_file(target.string()), "x");
}

TEST(OutputFile, ASymlinkToAFifoOrIntoAMissingDirectoryIsRefused) {
  const fs::path dir = scratch("symlink_bad");
  const fs::path fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fs::create_symlink(fifo, dir / "to_fifo");
  const std::string to_fifo =
      error_of([&] { check_output_file((dir / "to_fifo").string(), "--out"); });
  EXPECT_NE(to_fifo.find("is a symlink to " + fifo.string() + ", a FIFO"), std::string::npos)
      << to_fifo;
  EXPECT_NE(error_of([&] { write_file_atomic((dir / "to_fifo").string(), "x"); }), "");
  EXPECT_TRUE(is_fifo_node(fifo));
  EXPECT_TRUE(fs::is_symlink(dir / "to_fifo"));

  fs::create_symlink(dir / "missing" / "x.json", dir / "to_missing");
  const std::string missing =
      error_of([&] { check_output_file((dir / "to_missing").string(), "--out"); });
  EXPECT_NE(missing.find("its directory " + (dir / "missing").string()), std::string::npos)
      << missing;

  fs::create_symlink("loop", dir / "loop");
  EXPECT_NE(error_of([&] { check_output_file((dir / "loop").string(), "--out"); })
                .find("symlinks (a loop?)"),
            std::string::npos);
}

TEST(OutputFile, ADirectoryOrAMissingDirectoryIsRefusedAndNothingIsLeftBehind) {
  const fs::path dir = scratch("dirs");
  EXPECT_NE(error_of([&] { check_output_file(dir.string(), "--out"); }).find("is a directory"),
            std::string::npos);
  EXPECT_NE(error_of([&] { check_output_file((dir / "no" / "x.json").string(), "--out"); })
                .find("cannot be used"),
            std::string::npos);
  // /proc refuses new files whatever the permissions say (root passes every check).
  EXPECT_NE(error_of([&] { check_output_file("/proc/aspen-output.json", "--out"); })
                .find("no file can be created"),
            std::string::npos);
  EXPECT_EQ(check_output_file((dir / "new.json").string(), "--out"), (dir / "new.json").string());
  EXPECT_TRUE(fs::is_empty(dir)) << "the write probe is removed";
}

TEST(OutputFile, AnAtomicWriteKeepsTheModeOfTheFileItReplaces) {
  const fs::path dir = scratch("mode");
  const fs::path path = dir / "out.json";
  write_file_atomic(path.string(), "a");
  fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  write_file_atomic(path.string(), "b");
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  EXPECT_EQ(read_file(path.string()), "b");
}

TEST(OutputFile, AFifoInTheWayOfTheTemporaryFileIsNeverOpened) {
  const fs::path dir = scratch("temp_fifo");
  const fs::path path = dir / "out.json";
  ASSERT_EQ(::mkfifo((path.string() + ".tmp").c_str(), 0600), 0);
  const std::string error = error_of([&] { write_file_atomic(path.string(), "x"); });
  EXPECT_NE(error.find("in the way of the temporary file"), std::string::npos) << error;
  EXPECT_FALSE(fs::exists(path));
  // A regular file there is a crash's leftover and is replaced.
  fs::remove(path.string() + ".tmp");
  write_file_atomic(path.string() + ".tmp", "stale");
  write_file_atomic(path.string(), "x");
  EXPECT_EQ(read_file(path.string()), "x");
  EXPECT_FALSE(fs::exists(path.string() + ".tmp"));
}

TEST(OutputDirectory, AnExistingFileIsRefusedAndAMissingDirectoryIsCreated) {
  const fs::path dir = scratch("outdir");
  write_file_atomic((dir / "file").string(), "x");
  const std::string error =
      error_of([&] { check_output_directory((dir / "file").string(), "--out"); });
  EXPECT_NE(error.find("--out " + (dir / "file").string() + ": exists and is not a directory"),
            std::string::npos)
      << error;
  check_output_directory((dir / "a" / "b").string(), "--out");
  EXPECT_TRUE(fs::is_directory(dir / "a" / "b"));
  EXPECT_TRUE(fs::is_empty(dir / "a" / "b"));
  fs::create_directory_symlink(dir / "a", dir / "link");
  check_output_directory((dir / "link").string(), "--out");  // a link to a directory is one
}

TEST(InputDirectory, AMissingPathOrAFileIsRefusedNamingTheFlagAndADirectoryOrItsLinkPasses) {
  const fs::path dir = scratch("indir");
  write_file_atomic((dir / "file").string(), "x");
  const std::string file = (dir / "file").string();
  std::string error = error_of([&] { check_input_directory(file, "--model"); });
  EXPECT_NE(error.find("--model " + file + ": is not a directory"), std::string::npos) << error;
  const std::string missing = (dir / "missing").string();
  error = error_of([&] { check_input_directory(missing, "model.path"); });
  EXPECT_NE(error.find("model.path " + missing + ": does not exist"), std::string::npos) << error;
  error = error_of([&] { check_input_directory("", "model.path"); });
  EXPECT_NE(error.find("model.path: is empty"), std::string::npos) << error;
  check_input_directory(dir.string(), "--model");
  fs::create_directory_symlink(dir, dir / "link");
  check_input_directory((dir / "link").string(), "--model");
  EXPECT_FALSE(fs::exists(missing)) << "nothing is created";
}

}  // namespace
}  // namespace aspen
