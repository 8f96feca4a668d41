#include "aspen/dock/wire_format.h"
#include "aspen/dock/imports.h"

#include <algorithm>
#include <memory>

namespace aspen::dock {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the dock wire format is little-endian");

constexpr char kMagic[4] = {'A', 'S', 'P', 'D'};
constexpr int kMaxDims = 8;
// The most elements a received tensor may span: far beyond any real batch, far below
// where element counts, strides and byte sizes overflow int64.
constexpr int64_t kMaxElements = int64_t{1} << 40;

struct DtypeCode {
  uint8_t code;
  torch::Dtype dtype;
};
constexpr DtypeCode kDtypeCodes[] = {
    {1, torch::kFloat32}, {2, torch::kFloat64}, {3, torch::kFloat16}, {4, torch::kBFloat16},
    {5, torch::kInt64},   {6, torch::kInt32},   {7, torch::kInt16},   {8, torch::kInt8},
    {9, torch::kUInt8},   {10, torch::kBool},
};

}  // namespace

uint8_t wire_dtype_code(torch::Dtype dtype) {
  for (const DtypeCode& entry : kDtypeCodes) {
    if (entry.dtype == dtype) return entry.code;
  }
  throw Error(std::string("dtype ") + c10::toString(dtype) + " cannot be sent", "dock wire");
}

torch::Dtype wire_dtype(uint8_t code) {
  for (const DtypeCode& entry : kDtypeCodes) {
    if (entry.code == code) return entry.dtype;
  }
  throw Error("unknown dtype code " + std::to_string(code), "dock wire");
}

namespace {

// Equal-time comparison so the token cannot be guessed byte by byte from timing.
bool same_token(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

std::string frame_string(const zmq::message_t& frame) {
  return std::string(static_cast<const char*>(frame.data()), frame.size());
}

torch::Tensor tensor_from_frames(const zmq::message_t& header_frame, zmq::message_t& data_frame) {
  const std::string header = frame_string(header_frame);
  ByteReader reader(header);
  const torch::Dtype dtype = wire_dtype(reader.get<uint8_t>());
  const uint8_t ndim = reader.get<uint8_t>();
  check_input(ndim <= kMaxDims, "tensor with " + std::to_string(ndim) + " dims", "dock wire");
  // Both products are bounded before any tensor exists: the element count, and the
  // span the strides reach, where libtorch counts a zero dim as one. A shape such as
  // [0, 2^62, 2^62] has no elements, yet its strides overflow inside libtorch.
  std::vector<int64_t> shape(ndim);
  int64_t numel = 1;
  int64_t span = 1;  // >= numel, so numel cannot overflow either
  for (int64_t& size : shape) {
    size = reader.get<int64_t>();
    check_input(size >= 0 && std::max<int64_t>(size, 1) <= kMaxElements / span,
                "tensor dimension " + std::to_string(size) + " (a shape may span at most 2^40 "
                "elements, counting a zero dim as one)",
                "dock wire");
    span *= std::max<int64_t>(size, 1);
    numel *= size;
  }
  reader.expect_end();
  const auto options = torch::TensorOptions().dtype(dtype);
  const size_t item = c10::elementSize(dtype);
  check_input(data_frame.size() == static_cast<size_t>(numel) * item,
              "tensor data of " + std::to_string(data_frame.size()) + " bytes for " +
                  std::to_string(numel) + " elements",
              "dock wire");
  if (numel == 0) return torch::empty(shape, options);
  auto owner = std::make_shared<zmq::message_t>(std::move(data_frame));
  void* data = owner->data();
  torch::Tensor view = torch::from_blob(
      data, shape, [owner](void*) {}, options);
  if (reinterpret_cast<uintptr_t>(data) % item != 0) return view.clone();
  return view;
}

}  // namespace

std::vector<zmq::message_t> encode_message(const WireMessage& message, const std::string& token) {
  check_input(token.size() <= 0xffff, "token longer than 65535 bytes", "dock token");
  ByteWriter header;
  for (char c : kMagic) header.put<char>(c);
  header.put<uint8_t>(kWireVersion).put<uint8_t>(message.status).put<uint16_t>(message.op);
  header.put<uint16_t>(static_cast<uint16_t>(token.size()));
  std::string header_bytes = header.take() + token;
  std::vector<zmq::message_t> frames;
  frames.emplace_back(header_bytes.data(), header_bytes.size());
  frames.emplace_back(message.body.data(), message.body.size());
  for (const torch::Tensor& tensor : message.tensors) {
    torch::Tensor contiguous = tensor.is_contiguous() ? tensor : tensor.contiguous();
    if (!contiguous.device().is_cpu()) contiguous = contiguous.cpu();
    ByteWriter tensor_header;
    tensor_header.put<uint8_t>(wire_dtype_code(contiguous.scalar_type()));
    check_input(contiguous.dim() <= kMaxDims,
                "tensor with " + std::to_string(contiguous.dim()) + " dims", "dock wire");
    tensor_header.put<uint8_t>(static_cast<uint8_t>(contiguous.dim()));
    for (int64_t size : contiguous.sizes()) tensor_header.put<int64_t>(size);
    std::string th = tensor_header.take();
    frames.emplace_back(th.data(), th.size());
    const size_t bytes = contiguous.numel() * contiguous.element_size();
    if (bytes == 0) {
      frames.emplace_back();
      continue;
    }
    // Zero copy: the frame keeps a reference to the tensor until ZeroMQ has sent it.
    auto* keep = new torch::Tensor(contiguous);
    frames.emplace_back(
        contiguous.data_ptr(), bytes,
        [](void*, void* hint) { delete static_cast<torch::Tensor*>(hint); }, keep);
  }
  return frames;
}

WireMessage decode_message(std::vector<zmq::message_t>& frames, const std::string& token,
                           size_t max_bytes) {
  size_t total = 0;
  for (const zmq::message_t& frame : frames) total += frame.size();
  check_input(total <= max_bytes,
              "message of " + std::to_string(total) + " bytes exceeds the limit of " +
                  std::to_string(max_bytes),
              "dock wire", "raise max_message_bytes or send fewer rows per request");
  check_input(frames.size() >= 2 && frames.size() % 2 == 0,
              "message with " + std::to_string(frames.size()) + " frames", "dock wire",
              "expected header, body, then two frames per tensor");
  const std::string header = frame_string(frames[0]);
  ByteReader reader(header);
  for (char c : kMagic) check_input(reader.get<char>() == c, "bad magic", "dock wire");
  const uint8_t version = reader.get<uint8_t>();
  check_input(version == kWireVersion, "wire version " + std::to_string(version), "dock wire");
  WireMessage message;
  message.status = reader.get<uint8_t>();
  message.op = reader.get<uint16_t>();
  const uint16_t token_size = reader.get<uint16_t>();
  check_input(header.size() == 10u + token_size, "truncated message header", "dock wire");
  check_input(same_token(header.substr(10), token), "wrong or missing token", "dock wire",
              "every process of a dock must share its token");
  message.body = frame_string(frames[1]);
  for (size_t i = 2; i < frames.size(); i += 2) {
    message.tensors.push_back(tensor_from_frames(frames[i], frames[i + 1]));
  }
  return message;
}

WireMessage error_message(uint16_t op, const std::string& what) {
  WireMessage message;
  message.op = op;
  message.status = kWireError;
  message.body = ByteWriter().put_string(what).take();
  return message;
}

std::string error_text(const WireMessage& message) {
  ByteReader reader(message.body);
  return reader.get_string();
}

}  // namespace aspen::dock
