// Raw ZeroMQ requests for the dock service tests that speak to a service as a
// (possibly hostile) peer would: frames sent as given, no client library.
#pragma once

#include <chrono>
#include <iterator>
#include <string>
#include <vector>
#include <zmq_addon.hpp>

#include "aspen/dock/zmq_service.h"

namespace aspen::testing {

using namespace aspen::dock;

// Sends `frames` on a fresh DEALER and returns the reply's frames; empty when no reply
// came within 5 s.
inline std::vector<zmq::message_t> raw_call(const std::string& endpoint,
                                            std::vector<zmq::message_t> frames) {
  zmq::socket_t socket(dock_zmq_context(), zmq::socket_type::dealer);
  socket.set(zmq::sockopt::linger, 0);
  socket.connect(endpoint);
  for (size_t i = 0; i < frames.size(); ++i) {
    socket.send(frames[i],
                i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
  zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
  zmq::poll(&item, 1, std::chrono::milliseconds(5000));
  std::vector<zmq::message_t> reply;
  // No reply within the poll, or a receive that failed: the caller sees an empty vector.
  if ((item.revents & ZMQ_POLLIN) != 0 &&
      !zmq::recv_multipart(socket, std::back_inserter(reply)).has_value()) {
    reply.clear();
  }
  return reply;
}

}  // namespace aspen::testing
