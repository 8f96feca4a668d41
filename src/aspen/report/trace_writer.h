// TraceWriter: a timeline of the pipeline in Chrome trace-event JSON, the format
// Perfetto (ui.perfetto.dev) and chrome://tracing open:
//   {"traceEvents": [...], "displayTimeUnit": "ms"}
// Each role (rollout instance, trainer, reward, ...) registers a track (shown as a
// thread of the writer's process row: pid `process`, 1 by default; a multi-rank run
// gives rank r the row r + 1) and records spans on it: complete events (ph "X") whose ts/dur
// are microseconds since the writer was created (steady_clock). Instants (ph "i") and
// counters (ph "C") mark points and plot values.
//
// A writer with an empty path is disabled: every call returns at once and nothing
// is written, so call sites need no `if (tracing)`.
// Events stay in memory until flush(), which rewrites the whole file atomically
// (temp file + rename): call it periodically to watch a long run, and at the end.
// The destructor flushes once more if events arrived since the last flush (logging,
// not throwing, on failure).
//
// The file also records the writer's time zero on the machine's steady clock
// ("otherData": {"origin_steady_us": ...}), so merge_trace_files can put the
// timelines of several processes of one machine on one time axis.
// Thread safety: every method may be called from any thread.
// Errors: flush() throws aspen::Error naming the path when the file cannot be
// written; an unknown track id or a span ending before it starts throws aspen::Error.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "aspen/report/imports.h"
#include "aspen/util/mutex.h"

namespace aspen::report {

class TraceWriter {
 public:
  using Clock = std::chrono::steady_clock;

  explicit TraceWriter(std::string path, int process = 1,
                       const std::string& process_name = "aspen");
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  bool enabled() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  // Time zero of the trace.
  Clock::time_point origin() const { return origin_; }

  // Id of the track called `name`, registering it (and its metadata events) on first
  // use; the same name returns the same id. Tracks are listed in registration order.
  // Returns 0 when disabled.
  int track(const std::string& name);
  // Complete event [start, end] on `track`. `args` (a JSON object or null) is shown
  // in the event's details.
  void span(int track, const std::string& name, Clock::time_point start, Clock::time_point end,
            nlohmann::json args = nullptr);
  // Point event on `track`, now.
  void instant(int track, const std::string& name, nlohmann::json args = nullptr);
  // Value of the counter series `name`, now.
  void counter(const std::string& name, double value);

  // Writes every event so far to the file (atomically). No-op when disabled.
  void flush();
  // Events recorded so far (metadata included); 0 when disabled.
  size_t event_count() const;

 private:
  double micros_since_origin(Clock::time_point t) const;
  void check_track(int track) const REQUIRES(mutex_);

  const std::string path_;
  const int pid_;
  const Clock::time_point origin_;
  mutable Mutex mutex_;
  Mutex flush_mutex_;  // one flush at a time: they share the temp file
  std::vector<nlohmann::json> events_ GUARDED_BY(mutex_);
  size_t flushed_events_ GUARDED_BY(mutex_) = 0;  // events in the file after the last flush
  std::unordered_map<std::string, int> track_ids_ GUARDED_BY(mutex_);
};

// Appends the events of the trace files `parts` (other processes of this machine) to
// the trace file `into`, each shifted onto `into`'s time axis, and rewrites `into`
// atomically. aspen::Error naming the file that is missing or not such a trace.
void merge_trace_files(const std::string& into, const std::vector<std::string>& parts);

// RAII span: records [construction, destruction] on `track`.
class TraceSpan {
 public:
  TraceSpan(TraceWriter& writer, int track, std::string name, nlohmann::json args = nullptr);
  ~TraceSpan();
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

  // Adds a detail known only once the work is done (e.g. tokens produced).
  void set_arg(const std::string& key, nlohmann::json value);

 private:
  TraceWriter& writer_;
  int track_;
  std::string name_;
  nlohmann::json args_;
  TraceWriter::Clock::time_point start_;
};

}  // namespace aspen::report
