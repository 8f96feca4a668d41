// The dock's wire: frames as a peer holding the token could send them, decoded and
// then handled by a live controller and warehouse (the handlers ControllerService and
// WarehouseService run), message after message on the same state, so sequences
// such as allocate -> publish -> claim -> ack are reachable.
// Input: messages, each a u8 frame count (taken mod 7) and then per frame a u16
// little-endian length and that many bytes. Ops below 32 go to the controller, the
// rest to the warehouse. Checks: decode and handle either work or raise aspen::Error
// (the service turns it into an error reply); a handled request's reply is itself a
// well-formed message (it encodes and decodes again).
// Blocking requests (a claim or an allocation that must wait) run on a thread and are
// released by closing the controller after a few milliseconds, as a service shutdown
// does; later messages then meet a closed controller.
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <optional>
#include <vector>

#include "aspen/dock/controller.h"
#include "aspen/dock/controller_protocol.h"
#include "aspen/dock/warehouse.h"
#include "aspen/dock/warehouse_protocol.h"
#include "aspen/dock/wire_format.h"
#include "fuzz_common.h"

namespace {

const std::string kToken = "fuzz-token";
constexpr size_t kMaxMessageBytes = size_t{1} << 20;

aspen::dock::DockSchema fuzz_schema() {
  return aspen::dock::DockSchema(
      {{"tokens", torch::kInt64, aspen::dock::ColumnKind::kPerToken},
       {"reward", torch::kFloat32, aspen::dock::ColumnKind::kPerRow}},
      {{"trainer", {"tokens", "reward"}}, {"scorer", {"tokens"}}});
}

// Splits the input into messages of frames; stops at the first truncated frame.
std::vector<std::vector<zmq::message_t>> split_messages(const uint8_t* data, size_t size) {
  std::vector<std::vector<zmq::message_t>> messages;
  size_t at = 0;
  while (at < size) {
    const int frames = data[at++] % 7;
    std::vector<zmq::message_t> message;
    for (int f = 0; f < frames; ++f) {
      if (size - at < 2) return messages;
      uint16_t length = 0;
      std::memcpy(&length, data + at, 2);
      at += 2;
      if (size - at < length) return messages;
      message.emplace_back(data + at, length);
      at += length;
    }
    messages.push_back(std::move(message));
  }
  return messages;
}

void check_reply(const aspen::dock::WireMessage& reply) {
  std::vector<zmq::message_t> frames = aspen::dock::encode_message(reply, kToken);
  try {
    aspen::dock::decode_message(frames, kToken, size_t{1} << 30);
  } catch (const aspen::Error& e) {
    aspen::fuzz::defect(std::string("a reply does not decode: ") + e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto controller = std::make_shared<aspen::dock::DockController>(
      fuzz_schema(), aspen::dock::DockControllerOptions{/*capacity_rows=*/64});
  auto controller_handler =
      aspen::dock::make_controller_handler(controller, [] { return nlohmann::json::object(); });
  auto warehouse_handler = aspen::dock::make_warehouse_handler(std::make_shared<aspen::dock::Warehouse>());
  for (std::vector<zmq::message_t>& frames : split_messages(data, size)) {
    ASPEN_FUZZ_CONTRACT({
      aspen::dock::WireMessage request = aspen::dock::decode_message(frames, kToken, kMaxMessageBytes);
      aspen::dock::ServiceHandler& handler =
          request.op < 32 ? *controller_handler : *warehouse_handler;
      std::optional<aspen::dock::WireMessage> reply = handler.try_handle(request);
      if (!reply) {
        auto waiting = std::async(std::launch::async,
                                  [&handler, &request] { return handler.handle_blocking(request); });
        if (waiting.wait_for(std::chrono::milliseconds(5)) != std::future_status::ready) {
          controller_handler->close();
        }
        reply = waiting.get();
      }
      check_reply(*reply);
    });
  }
  controller_handler->close();
  return 0;
}
