// The binary framing of cross-process dock messages (ZeroMQ multipart), and the
// byte reader/writer the request bodies are built with. All integers are
// little-endian (the only byte order Aspen runs on; checked at compile time).
//
//   frame 0  header   "ASPD" | u8 version (=1) | u8 status (0 ok, 1 error) | u16 op |
//                      u16 token length | token bytes
//   frame 1  body     op-specific fields (see controller_service.cpp and
//                      warehouse_service.cpp); an error reply's body is a u32-prefixed
//                      UTF-8 message
//   then, per tensor, two frames:
//            tensor header  u8 dtype code | u8 ndim (<= 8) | i64 shape[ndim]
//            tensor data    exactly numel * itemsize raw bytes, C-contiguous
//   dtype codes: 1 float32, 2 float64, 3 float16, 4 bfloat16, 5 int64, 6 int32,
//                7 int16, 8 int8, 9 uint8, 10 bool (stable, unlike torch's enum)
//
// Every message, request or reply, carries the shared token. decode_message()
// rejects (throws aspen::Error) a wrong or missing token, a bad magic/version, a
// frame count that is not 2 + 2 * tensors, a truncated header or tensor header, a
// data frame whose size does not match its shape, and a message whose total size
// exceeds max_bytes. Tensors are sent without a copy (the frame holds a reference to
// the tensor) and received without a copy (the tensor holds the frame) when the
// frame is aligned for the dtype; otherwise they are copied once.
// Thread safety: pure functions; ByteReader/ByteWriter are single-thread objects.
#pragma once

#include <torch/torch.h>

#include <cstring>
#include <string>
#include <type_traits>
#include <vector>
#include <zmq.hpp>

#include "aspen/dock/imports.h"
#include "aspen/util/error.h"

namespace aspen::dock {

struct WireMessage {
  uint16_t op = 0;
  uint8_t status = 0;  // kWireOk or kWireError
  std::string body;
  std::vector<torch::Tensor> tensors;
};

constexpr uint8_t kWireOk = 0;
constexpr uint8_t kWireError = 1;
constexpr uint8_t kWireVersion = 1;

std::vector<zmq::message_t> encode_message(const WireMessage& message, const std::string& token);
WireMessage decode_message(std::vector<zmq::message_t>& frames, const std::string& token,
                           size_t max_bytes);
// The stable dtype codes above; aspen::Error for a dtype/code outside the table.
uint8_t wire_dtype_code(torch::Dtype dtype);
torch::Dtype wire_dtype(uint8_t code);
// An error reply carrying `what`.
WireMessage error_message(uint16_t op, const std::string& what);
// The message of an error reply.
std::string error_text(const WireMessage& message);

class ByteWriter {
 public:
  template <typename T>
  ByteWriter& put(T value) {
    static_assert(std::is_arithmetic_v<T>);
    bytes_.append(reinterpret_cast<const char*>(&value), sizeof(T));
    return *this;
  }
  ByteWriter& put_string(const std::string& s) {
    put<uint32_t>(static_cast<uint32_t>(s.size()));
    bytes_.append(s);
    return *this;
  }
  template <typename T>
  ByteWriter& put_vector(const std::vector<T>& values) {
    put<uint32_t>(static_cast<uint32_t>(values.size()));
    for (const T& v : values) put<T>(v);
    return *this;
  }
  ByteWriter& put_strings(const std::vector<std::string>& values) {
    put<uint32_t>(static_cast<uint32_t>(values.size()));
    for (const std::string& v : values) put_string(v);
    return *this;
  }
  std::string take() { return std::move(bytes_); }

 private:
  std::string bytes_;
};

// Bounds-checked reads; a short buffer throws aspen::Error("truncated ...").
class ByteReader {
 public:
  explicit ByteReader(const std::string& bytes) : bytes_(bytes) {}
  template <typename T>
  T get() {
    static_assert(std::is_arithmetic_v<T>);
    need(sizeof(T));
    T value;
    std::memcpy(&value, bytes_.data() + offset_, sizeof(T));
    offset_ += sizeof(T);
    return value;
  }
  std::string get_string() {
    const uint32_t size = get<uint32_t>();
    need(size);
    std::string s = bytes_.substr(offset_, size);
    offset_ += size;
    return s;
  }
  template <typename T>
  std::vector<T> get_vector() {
    const uint32_t count = get<uint32_t>();
    need(static_cast<size_t>(count) * sizeof(T));  // before reserving: no huge allocations
    std::vector<T> values(count);
    for (T& v : values) v = get<T>();
    return values;
  }
  std::vector<std::string> get_strings() {
    const uint32_t count = get<uint32_t>();
    need(static_cast<size_t>(count) * sizeof(uint32_t));
    std::vector<std::string> values(count);
    for (std::string& v : values) v = get_string();
    return values;
  }
  // For a field a newer sender appends and an older one leaves out.
  bool at_end() const { return offset_ == bytes_.size(); }
  // Trailing bytes mean the sender and receiver disagree on the layout.
  void expect_end() const {
    check_input(offset_ == bytes_.size(), "message body has trailing bytes", "dock wire");
  }

 private:
  void need(size_t n) const {
    check_input(n <= bytes_.size() - offset_, "truncated message body", "dock wire",
                "sender and receiver must run the same Aspen version");
  }
  const std::string& bytes_;
  size_t offset_ = 0;
};

}  // namespace aspen::dock
