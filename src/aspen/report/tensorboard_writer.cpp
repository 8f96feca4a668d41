#include "aspen/report/tensorboard_writer.h"

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>

#include "aspen/report/imports.h"
#include "aspen/util/error.h"

namespace aspen::report {
namespace {

namespace fs = std::filesystem;

double unix_seconds_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// A name no file of `directory` has yet: two writers of one process in one second
// (a run resumed at once, as the tests do) must not truncate each other's file.
fs::path new_event_file_path(const fs::path& directory) {
  const std::string base = "events.out.tfevents." + std::to_string(std::time(nullptr)) + "." +
                           host_name() + "." + std::to_string(getpid()) + ".aspen";
  fs::path path = directory / base;
  for (int n = 1; fs::exists(path); ++n) path = directory / (base + "." + std::to_string(n));
  return path;
}

void add_numeric_fields(const nlohmann::json& object, const std::string& prefix,
                        std::vector<TensorBoardScalar>& out) {
  for (const auto& [key, value] : object.items()) {
    if (value.is_object()) {
      add_numeric_fields(value, prefix + key + "/", out);
    } else if (value.is_number()) {
      out.push_back({prefix + key, value.get<double>()});
    }
  }
}

}  // namespace

TensorBoardWriter::TensorBoardWriter(const std::string& directory, int64_t start_step) {
  std::error_code error;
  fs::create_directories(directory, error);
  check_input(!error && fs::is_directory(directory),
              "cannot be created" + (error ? " (" + error.message() + ")" : std::string()),
              directory, "TensorBoard event files are written there");
  path_ = new_event_file_path(directory).string();
  file_.open(path_, std::ios::binary | std::ios::trunc);
  check_input(file_.good(), "cannot be written", path_, "TensorBoard event file");
  const double now = unix_seconds_now();
  write_event(file_version_event(now));
  write_event(session_start_event(now, start_step));
}

void TensorBoardWriter::add(int64_t step, const std::vector<TensorBoardScalar>& scalars) {
  if (scalars.empty()) return;
  write_event(scalars_event(unix_seconds_now(), step, scalars));
}

void TensorBoardWriter::flush() {
  file_.flush();
  check_input(file_.good(), "cannot be written (disk full?)", path_, "TensorBoard event file");
}

void TensorBoardWriter::write_event(const std::string& event) {
  const std::string record = tfrecord(event);
  file_.write(record.data(), static_cast<std::streamsize>(record.size()));
}

std::vector<TensorBoardScalar> numeric_fields(const nlohmann::json& object) {
  std::vector<TensorBoardScalar> out;
  if (object.is_object()) add_numeric_fields(object, "", out);
  return out;
}

void remove_event_files(const std::string& directory) {
  if (!fs::is_directory(directory)) return;
  std::vector<fs::path> doomed;  // not removed while the directory is being iterated
  for (const fs::directory_entry& entry : fs::directory_iterator(directory)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && name.find("tfevents") != std::string::npos) {
      doomed.push_back(entry.path());
    }
  }
  for (const fs::path& path : doomed) fs::remove(path);
}

}  // namespace aspen::report
