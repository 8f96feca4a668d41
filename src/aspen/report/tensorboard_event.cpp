#include "aspen/report/tensorboard_event.h"

#include <cstring>

#include "aspen/report/imports.h"
#include "aspen/util/crc32c.h"

namespace aspen::report {
namespace {

// Protobuf wire types and the Event fields used here (see the header).
constexpr uint32_t kWireVarint = 0;
constexpr uint32_t kWireFixed64 = 1;
constexpr uint32_t kWireBytes = 2;
constexpr uint32_t kWireFixed32 = 5;
constexpr uint32_t kEventWallTime = 1;
constexpr uint32_t kEventStep = 2;
constexpr uint32_t kEventFileVersion = 3;
constexpr uint32_t kEventSummary = 5;
constexpr uint32_t kEventSessionLog = 7;
constexpr uint32_t kSummaryValue = 1;
constexpr uint32_t kValueTag = 1;
constexpr uint32_t kValueSimpleValue = 2;
constexpr uint32_t kSessionLogStatus = 1;
constexpr uint64_t kSessionLogStart = 1;

void put_little_endian(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFFu));
}

void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void put_key(std::string& out, uint32_t field, uint32_t wire_type) {
  put_varint(out, (uint64_t{field} << 3) | wire_type);
}

void put_bytes_field(std::string& out, uint32_t field, std::string_view bytes) {
  put_key(out, field, kWireBytes);
  put_varint(out, bytes.size());
  out.append(bytes.data(), bytes.size());
}

// wall_time and step, the fields every event starts with (proto3 leaves zeros out).
std::string event_header(double wall_time, int64_t step) {
  std::string out;
  if (wall_time != 0.0) {
    uint64_t bits = 0;
    std::memcpy(&bits, &wall_time, sizeof bits);
    put_key(out, kEventWallTime, kWireFixed64);
    put_little_endian(out, bits, 8);
  }
  if (step != 0) {
    put_key(out, kEventStep, kWireVarint);
    put_varint(out, static_cast<uint64_t>(step));  // int64: negatives take 10 bytes
  }
  return out;
}

std::string summary_value(const TensorBoardScalar& scalar) {
  std::string out;
  put_bytes_field(out, kValueTag, scalar.tag);
  const float value = static_cast<float>(scalar.value);
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  put_key(out, kValueSimpleValue, kWireFixed32);
  put_little_endian(out, bits, 4);
  return out;
}

}  // namespace

std::string tfrecord(std::string_view data) {
  std::string length;
  put_little_endian(length, data.size(), 8);
  std::string out = length;
  put_little_endian(out, masked_crc32c(length), 4);
  out.append(data.data(), data.size());
  put_little_endian(out, masked_crc32c(data), 4);
  return out;
}

std::string file_version_event(double wall_time) {
  std::string out = event_header(wall_time, 0);
  put_bytes_field(out, kEventFileVersion, "brain.Event:2");
  return out;
}

std::string scalars_event(double wall_time, int64_t step,
                          const std::vector<TensorBoardScalar>& scalars) {
  std::string summary;
  for (const TensorBoardScalar& scalar : scalars) {
    put_bytes_field(summary, kSummaryValue, summary_value(scalar));
  }
  std::string out = event_header(wall_time, step);
  put_bytes_field(out, kEventSummary, summary);
  return out;
}

std::string session_start_event(double wall_time, int64_t step) {
  std::string session_log;
  put_key(session_log, kSessionLogStatus, kWireVarint);
  put_varint(session_log, kSessionLogStart);
  std::string out = event_header(wall_time, step);
  put_bytes_field(out, kEventSessionLog, session_log);
  return out;
}

}  // namespace aspen::report
