// TensorBoardWriter: scalars into a new TensorBoard event file in a directory, named
//   events.out.tfevents.<unix seconds>.<hostname>.<pid>.aspen
// (".1", ".2", ... appended if that name is taken). TensorBoard reads every file of a
// directory whose name holds "tfevents", in name order, and merges them, so a resumed
// run adds a file instead of rewriting one. Each file starts with the file version and
// a SessionLog START at the step the run (re)starts from: on a START, TensorBoard's
// readers drop the earlier files' points at steps >= it (the server's loader skips a
// run's first START, so the first run's file needs one too for a resumed run's to
// count). The bytes: report/tensorboard_event.h.
//
// Events are buffered until flush(): call it when a live TensorBoard should see them
// (after each iteration). The destructor writes what is left, without checking.
// Errors: aspen::Error naming the path when the directory or file cannot be created
// or written. Not thread-safe: one thread writes.
#pragma once

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aspen/report/imports.h"
#include "aspen/report/tensorboard_event.h"

namespace aspen::report {

class TensorBoardWriter {
 public:
  // Creates `directory` if needed and a new event file in it, which supersedes what
  // earlier files of the directory logged at steps >= `start_step` (0 for a new run,
  // N + 1 for a run resumed after step N).
  TensorBoardWriter(const std::string& directory, int64_t start_step);

  // One event holding `scalars` at `step`; nothing is written for an empty list.
  void add(int64_t step, const std::vector<TensorBoardScalar>& scalars);

  // Writes the buffered events to the file.
  void flush();

  const std::string& path() const { return path_; }

 private:
  void write_event(const std::string& event);

  std::string path_;
  std::ofstream file_;
};

// The numbers of a JSON object as scalars, in the object's key order: nested objects
// flattened with "/" ({"a": {"b": 1}} -> "a/b", which TensorBoard groups under "a").
// Strings, booleans, nulls and arrays are left out.
std::vector<TensorBoardScalar> numeric_fields(const nlohmann::json& object);

// Deletes the event files (names holding "tfevents") directly in `directory`, and
// nothing else: what a fresh run clears of an earlier run in its directory. A missing
// directory is fine.
void remove_event_files(const std::string& directory);

}  // namespace aspen::report
