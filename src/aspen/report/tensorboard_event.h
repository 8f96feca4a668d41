// The bytes of a TensorBoard event file, encoded by hand (no protobuf dependency).
//
// An event file is a TFRecord stream: each record is
//   u64 length (little-endian), u32 masked CRC32C of those 8 bytes,
//   the data, u32 masked CRC32C of the data            (util/crc32c.h)
// and each record's data is one serialized `tensorboard.Event` protobuf:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3;
//             Summary summary = 5; SessionLog session_log = 7; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }
//   SessionLog { Status status = 1; }   (START = 1)
// A file's first event carries file_version "brain.Event:2"; the others carry a
// summary of scalars, or a SessionLog START: where a run (re)started, which makes
// TensorBoard's readers drop what earlier files logged at steps >= its step.
// Encoding is proto3's canonical one (fields in number order, default values left out),
// so the bytes equal what the protobuf library writes for the same message.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "aspen/report/imports.h"

namespace aspen::report {

// One scalar of an event: its tag ("reward_mean", "stage_seconds/update") and value,
// stored as a float32 (TensorBoard's simple_value).
struct TensorBoardScalar {
  std::string tag;
  double value = 0.0;
};

// `data` framed as one TFRecord record (length, its masked CRC, data, its masked CRC).
std::string tfrecord(std::string_view data);

// The first event of every file: wall_time and file_version "brain.Event:2".
std::string file_version_event(double wall_time);

// Scalars logged at `step`, all in one Summary.
std::string scalars_event(double wall_time, int64_t step,
                          const std::vector<TensorBoardScalar>& scalars);

// SessionLog START at `step`: a run starts (or is resumed) there; TensorBoard drops
// events of earlier files at steps >= `step` (see report/tensorboard_writer.h).
std::string session_start_event(double wall_time, int64_t step);

}  // namespace aspen::report
