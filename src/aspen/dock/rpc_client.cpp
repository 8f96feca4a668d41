#include "aspen/dock/rpc_client.h"

#include <zmq_addon.hpp>

#include "aspen/dock/imports.h"
#include "aspen/dock/zmq_service.h"

namespace aspen::dock {

RpcClient::RpcClient(RpcClientOptions options) : options_(std::move(options)) {
  check_input(!options_.token.empty(), "empty token", "dock client " + options_.endpoint,
              "every dock service requires a shared token");
}

RpcClient::~RpcClient() = default;

zmq::socket_t RpcClient::acquire() {
  {
    MutexLock lock(mutex_);
    if (!idle_.empty()) {
      zmq::socket_t socket = std::move(idle_.back());
      idle_.pop_back();
      return socket;
    }
  }
  zmq::socket_t socket(dock_zmq_context(), zmq::socket_type::dealer);
  socket.set(zmq::sockopt::linger, 0);
  socket.connect(options_.endpoint);
  return socket;
}

void RpcClient::release(zmq::socket_t socket) {
  MutexLock lock(mutex_);
  idle_.push_back(std::move(socket));
}

WireMessage RpcClient::call(const WireMessage& request, double extra_wait_s) {
  zmq::socket_t socket = acquire();
  std::vector<zmq::message_t> frames = encode_message(request, options_.token);
  for (size_t i = 0; i < frames.size(); ++i) {
    socket.send(frames[i],
                i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
  const auto wait =
      std::chrono::milliseconds(static_cast<int64_t>((options_.timeout_s + extra_wait_s) * 1000.0));
  zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
  zmq::poll(&item, 1, wait);
  if (!(item.revents & ZMQ_POLLIN)) {
    // The socket is dropped with its request: a late reply dies with it.
    throw Error("no reply within " + std::to_string(options_.timeout_s + extra_wait_s) + " s",
                "dock service " + options_.endpoint, "is the service running?");
  }
  std::vector<zmq::message_t> reply_frames;
  if (!zmq::recv_multipart(socket, std::back_inserter(reply_frames))) {
    throw Error("reply interrupted", "dock service " + options_.endpoint);
  }
  release(std::move(socket));
  WireMessage reply;
  try {
    reply = decode_message(reply_frames, options_.token, options_.max_message_bytes);
  } catch (const Error& signed_error) {
    // A rejection carries no token (the service does not trust the request).
    WireMessage rejection;
    try {
      rejection = decode_message(reply_frames, "", options_.max_message_bytes);
    } catch (const Error&) {
      throw Error("bad reply: " + signed_error.problem(), "dock service " + options_.endpoint);
    }
    if (rejection.status != kWireError) throw signed_error;
    throw Error(error_text(rejection), "dock service " + options_.endpoint,
                "check the shared token and the message size limit");
  }
  if (reply.status == kWireError) {
    throw Error(error_text(reply), "dock service " + options_.endpoint);
  }
  return reply;
}

}  // namespace aspen::dock
