#include "aspen/report/trace_writer.h"

#include <fstream>

#include "aspen/report/imports.h"
#include "aspen/util/error.h"
#include "aspen/util/file.h"
#include "aspen/util/log.h"

namespace aspen::report {

namespace {

double origin_steady_us(std::chrono::steady_clock::time_point origin) {
  return std::chrono::duration<double, std::micro>(origin.time_since_epoch()).count();
}

nlohmann::json read_trace_file(const std::string& path) {
  std::ifstream in(path);
  check_input(static_cast<bool>(in), "cannot be read", path, "is the trace written?");
  nlohmann::json trace = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  check_input(trace.is_object() && trace.contains("traceEvents") &&
                  trace["traceEvents"].is_array() &&
                  trace.value("otherData", nlohmann::json::object()).contains("origin_steady_us"),
              "is not an aspen trace (traceEvents and otherData.origin_steady_us)", path);
  return trace;
}

}  // namespace

TraceWriter::TraceWriter(std::string path, int process, const std::string& process_name)
    : path_(std::move(path)), pid_(process), origin_(Clock::now()) {
  if (!enabled()) return;
  events_.push_back({{"ph", "M"},
                     {"name", "process_name"},
                     {"pid", pid_},
                     {"tid", 0},
                     {"args", {{"name", process_name}}}});
  events_.push_back({{"ph", "M"},
                     {"name", "process_sort_index"},
                     {"pid", pid_},
                     {"tid", 0},
                     {"args", {{"sort_index", pid_}}}});
}

TraceWriter::~TraceWriter() {
  if (!enabled()) return;
  {
    MutexLock lock(mutex_);
    if (flushed_events_ == events_.size()) return;  // the file is already complete
  }
  try {
    flush();
  } catch (const std::exception& e) {
    log_warn("trace not written to ", path_, ": ", e.what());
  }
}

double TraceWriter::micros_since_origin(Clock::time_point t) const {
  return std::chrono::duration<double, std::micro>(t - origin_).count();
}

void TraceWriter::check_track(int track) const {
  check_input(track >= 1 && track <= static_cast<int>(track_ids_.size()),
              "unknown trace track " + std::to_string(track), path_,
              "register tracks with TraceWriter::track");
}

int TraceWriter::track(const std::string& name) {
  if (!enabled()) return 0;
  MutexLock lock(mutex_);
  auto found = track_ids_.find(name);
  if (found != track_ids_.end()) return found->second;
  const int id = static_cast<int>(track_ids_.size()) + 1;  // tid 0 is the process row
  track_ids_.emplace(name, id);
  events_.push_back({{"ph", "M"},
                     {"name", "thread_name"},
                     {"pid", pid_},
                     {"tid", id},
                     {"args", {{"name", name}}}});
  // Without a sort index viewers order tracks by tid anyway, but say so explicitly.
  events_.push_back({{"ph", "M"},
                     {"name", "thread_sort_index"},
                     {"pid", pid_},
                     {"tid", id},
                     {"args", {{"sort_index", id}}}});
  return id;
}

void TraceWriter::span(int track, const std::string& name, Clock::time_point start,
                       Clock::time_point end, nlohmann::json args) {
  if (!enabled()) return;
  check_input(end >= start, "trace span '" + name + "' ends before it starts", path_);
  nlohmann::json event = {{"ph", "X"},
                          {"name", name},
                          {"pid", pid_},
                          {"tid", track},
                          {"ts", micros_since_origin(start)},
                          {"dur", std::chrono::duration<double, std::micro>(end - start).count()}};
  if (!args.is_null()) event["args"] = std::move(args);
  MutexLock lock(mutex_);
  check_track(track);
  events_.push_back(std::move(event));
}

void TraceWriter::instant(int track, const std::string& name, nlohmann::json args) {
  if (!enabled()) return;
  nlohmann::json event = {{"ph", "i"},    {"s", "t"},  // scope: this track
                          {"name", name}, {"pid", pid_},
                          {"tid", track}, {"ts", micros_since_origin(Clock::now())}};
  if (!args.is_null()) event["args"] = std::move(args);
  MutexLock lock(mutex_);
  check_track(track);
  events_.push_back(std::move(event));
}

void TraceWriter::counter(const std::string& name, double value) {
  if (!enabled()) return;
  nlohmann::json event = {{"ph", "C"},
                          {"name", name},
                          {"pid", pid_},
                          {"ts", micros_since_origin(Clock::now())},
                          {"args", {{name, value}}}};
  MutexLock lock(mutex_);
  events_.push_back(std::move(event));
}

void TraceWriter::flush() {
  if (!enabled()) return;
  MutexLock flush_lock(flush_mutex_);
  std::string text;
  size_t count = 0;
  {
    // Serialize under the lock, event by event (no copy of the event list); the disk
    // write happens outside it so recording threads wait only for the dump.
    MutexLock lock(mutex_);
    text = "{\"traceEvents\":[";
    for (size_t i = 0; i < events_.size(); ++i) {
      if (i > 0) text += ",\n";
      text += events_[i].dump();
    }
    text += "],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":" +
            nlohmann::json{{"origin_steady_us", origin_steady_us(origin_)}}.dump() + "}\n";
    count = events_.size();
  }
  write_file_atomic(path_, text);
  MutexLock lock(mutex_);
  flushed_events_ = count;  // flushes are serialized, so this only grows
}

size_t TraceWriter::event_count() const {
  MutexLock lock(mutex_);
  return events_.size();
}

TraceSpan::TraceSpan(TraceWriter& writer, int track, std::string name, nlohmann::json args)
    : writer_(writer),
      track_(track),
      name_(std::move(name)),
      args_(std::move(args)),
      start_(TraceWriter::Clock::now()) {}

TraceSpan::~TraceSpan() {
  if (!writer_.enabled()) return;
  try {
    writer_.span(track_, name_, start_, TraceWriter::Clock::now(), std::move(args_));
  } catch (const std::exception& e) {
    // A destructor must not throw (it may run during unwinding); a lost span is harmless.
    log_warn("trace span '", name_, "' dropped: ", e.what());
  }
}

void TraceSpan::set_arg(const std::string& key, nlohmann::json value) {
  if (!writer_.enabled()) return;
  args_[key] = std::move(value);
}

void merge_trace_files(const std::string& into, const std::vector<std::string>& parts) {
  nlohmann::json merged = read_trace_file(into);
  const double origin = merged["otherData"]["origin_steady_us"].get<double>();
  for (const std::string& part : parts) {
    const nlohmann::json trace = read_trace_file(part);
    const double shift = trace["otherData"]["origin_steady_us"].get<double>() - origin;
    for (nlohmann::json event : trace["traceEvents"]) {
      if (event.contains("ts")) event["ts"] = event["ts"].get<double>() + shift;
      merged["traceEvents"].push_back(std::move(event));
    }
  }
  write_file_atomic(into, merged.dump() + "\n");
}

}  // namespace aspen::report
