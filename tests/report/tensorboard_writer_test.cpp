// TensorBoardWriter: a new, uniquely named event file per writer, whose records read
// back intact (lengths and CRCs check) and in order, visible on disk after flush();
// metrics JSON becomes flattened scalars; a fresh run's cleanup removes only event files.
#include "aspen/report/tensorboard_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "aspen/util/crc32c.h"
#include "aspen/util/error.h"
#include "aspen/util/file.h"

namespace aspen::report {
namespace {

namespace fs = std::filesystem;

uint64_t read_little_endian(const std::string& data, size_t offset, int count) {
  uint64_t value = 0;
  for (int i = 0; i < count; ++i) {
    value |= uint64_t{static_cast<uint8_t>(data[offset + i])} << (8 * i);
  }
  return value;
}

// The data of every record of an event file; fails the test on a torn or corrupt one.
std::vector<std::string> read_records(const std::string& path) {
  const std::string file = read_file(path);
  std::vector<std::string> records;
  size_t at = 0;
  while (at < file.size()) {
    EXPECT_LE(at + 12, file.size()) << "torn length at " << at;
    if (at + 12 > file.size()) break;
    const uint64_t length = read_little_endian(file, at, 8);
    EXPECT_EQ(read_little_endian(file, at + 8, 4), masked_crc32c(file.substr(at, 8)));
    EXPECT_LE(at + 12 + length + 4, file.size()) << "torn record at " << at;
    if (at + 12 + length + 4 > file.size()) break;
    const std::string data = file.substr(at + 12, length);
    EXPECT_EQ(read_little_endian(file, at + 12 + length, 4), masked_crc32c(data));
    records.push_back(data);
    at += 12 + length + 4;
  }
  return records;
}

std::string fresh_dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/" + name;
  fs::remove_all(dir);
  return dir;
}

TEST(TensorBoardWriter, NamesItsFileLikeTensorFlowWithHostAndPid) {
  const std::string dir = fresh_dir("aspen_tb_name");
  TensorBoardWriter writer(dir, 0);
  const std::string name = fs::path(writer.path()).filename().string();
  EXPECT_EQ(fs::path(writer.path()).parent_path(), fs::path(dir));
  EXPECT_TRUE(
      std::regex_match(name, std::regex(R"(events\.out\.tfevents\.\d{10}\..+\.\d+\.aspen)")))
      << name;
  EXPECT_NE(name.find("." + std::to_string(getpid()) + ".aspen"), std::string::npos) << name;
}

TEST(TensorBoardWriter, FlushedEventsAreOnDiskInOrderBeforeTheWriterCloses) {
  const std::string dir = fresh_dir("aspen_tb_records");
  TensorBoardWriter writer(dir, 3);
  writer.add(3, {{"loss", 0.5}});
  writer.add(4, {});  // nothing to log: no event
  writer.add(5, {{"loss", 0.25}, {"acc", 1.0}});
  writer.flush();
  const std::vector<std::string> records = read_records(writer.path());
  ASSERT_EQ(records.size(), 4u);
  // wall_time varies; everything after its 9 bytes is fixed.
  EXPECT_EQ(records[0].substr(9), file_version_event(0.0));
  EXPECT_EQ(records[1].substr(9), session_start_event(0.0, 3)) << "where the run (re)starts";
  EXPECT_EQ(records[2].substr(9), scalars_event(0.0, 3, {{"loss", 0.5}}));
  EXPECT_EQ(records[3].substr(9), scalars_event(0.0, 5, {{"loss", 0.25}, {"acc", 1.0}}));
  EXPECT_EQ(records[3][0], '\x09') << "wall_time comes first";
}

TEST(TensorBoardWriter, TwoWritersInOneSecondGetTwoFiles) {
  const std::string dir = fresh_dir("aspen_tb_two");
  TensorBoardWriter first(dir, 0);
  first.add(1, {{"a", 1.0}});
  first.flush();
  TensorBoardWriter second(dir, 2);
  second.flush();
  EXPECT_NE(first.path(), second.path());
  EXPECT_EQ(read_records(first.path()).size(), 3u) << "the second writer left the first alone";
  EXPECT_EQ(read_records(second.path()).size(), 2u);
}

TEST(TensorBoardWriter, AnUncreatableDirectoryIsAnErrorNamingIt) {
  try {
    TensorBoardWriter writer("/proc/aspen-no-such-dir/tensorboard", 0);
    FAIL() << "expected aspen::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.input(), "/proc/aspen-no-such-dir/tensorboard");
  }
}

TEST(NumericFields, FlattensNestedObjectsAndSkipsWhatIsNotANumber) {
  const nlohmann::json line = {{"phase", "rl"},
                               {"iteration", 4},
                               {"reward_mean", 0.75},
                               {"done", true},
                               {"missing", nullptr},
                               {"groups", {1, 2, 3}},
                               {"bubbles", {{"padding", 0.5}, {"histogram", {{"0", 128}}}}}};
  const std::vector<TensorBoardScalar> scalars = numeric_fields(line);
  std::vector<std::pair<std::string, double>> got;
  for (const auto& s : scalars) got.emplace_back(s.tag, s.value);
  const std::vector<std::pair<std::string, double>> expected = {{"bubbles/histogram/0", 128.0},
                                                                {"bubbles/padding", 0.5},
                                                                {"iteration", 4.0},
                                                                {"reward_mean", 0.75}};
  EXPECT_EQ(got, expected);
  EXPECT_TRUE(numeric_fields(nlohmann::json::array({1, 2})).empty());
}

TEST(RemoveEventFiles, RemovesOnlyEventFiles) {
  const std::string dir = fresh_dir("aspen_tb_remove");
  std::string event_path;
  {
    TensorBoardWriter writer(dir, 0);
    event_path = writer.path();
  }
  std::ofstream(dir + "/notes.txt") << "keep me";
  fs::create_directories(dir + "/tfevents-subdir");
  remove_event_files(dir);
  EXPECT_FALSE(fs::exists(event_path));
  EXPECT_TRUE(fs::exists(dir + "/notes.txt"));
  EXPECT_TRUE(fs::exists(dir + "/tfevents-subdir"));
  remove_event_files(dir + "/missing");  // nothing there: nothing to do
}

}  // namespace
}  // namespace aspen::report
