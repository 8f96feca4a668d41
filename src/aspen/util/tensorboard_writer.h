// TensorBoardWriter: scalars into a new TensorBoard event file in a directory, named
//   events.out.tfevents.<unix seconds>.<hostname>.<pid>.aspen
// (".1", ".2", ... appended if that name is taken). TensorBoard reads every file of a
// directory whose name holds "tfevents", in name order, and merges them, so a resumed
// run adds a file instead of rewriting one; restart_at() tells the reader which of the
// earlier files' steps the new file supersedes. The bytes: util/tensorboard_event.h.
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

#include "aspen/util/tensorboard_event.h"

namespace aspen {

class TensorBoardWriter {
 public:
  // Creates `directory` if needed and a new event file in it (its file_version event).
  explicit TensorBoardWriter(const std::string& directory);

  // The run restarts at `step` (resumed after step - 1): TensorBoard drops what earlier
  // files of the directory logged at steps >= `step`.
  void restart_at(int64_t step);

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
// nothing else: what a fresh run leaves of an earlier run in its directory. A missing
// directory is fine.
void remove_event_files(const std::string& directory);

}  // namespace aspen
