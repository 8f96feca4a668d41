// ZmqService: one ROUTER socket serving dock requests (controller or warehouse) on
// its own thread. Requests are decoded with the wire format (wire_format.h); a
// wrong/missing token, a malformed or truncated message, or one over
// max_message_bytes is rejected: logged with log_warn, answered with an error reply
// that carries no token (so an unauthenticated peer learns nothing), and the
// service keeps serving. Note the size check runs after ZeroMQ has received the
// message; peers are on loopback by default.
// Blocking requests (a claim waiting for rows, an allocation waiting for capacity)
// must not stall the I/O thread: the handler answers try_handle() with nullopt and
// the service runs handle_blocking() on a thread of its own, whose reply comes back
// to the I/O thread through an inproc PUSH/PULL pair (ZeroMQ sockets are
// single-thread objects, the context is thread-safe).
// Thread safety: the public methods are thread-safe. Locking: blocking_mutex_ guards
// blocking_; the sockets are touched only by the I/O thread; counters are atomics.
#pragma once

#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "aspen/dock/imports.h"
#include "aspen/dock/wire_format.h"
#include "aspen/util/mutex.h"

namespace aspen::dock {

// The process-wide ZeroMQ context every dock socket uses.
zmq::context_t& dock_zmq_context();

struct ZmqServiceOptions {
  // Loopback unless told otherwise; port * picks a free port (see endpoint()).
  std::string bind = "tcp://127.0.0.1:*";
  std::string token;  // shared secret, required (non-empty)
  size_t max_message_bytes = size_t{1} << 30;
};

class ServiceHandler {
 public:
  virtual ~ServiceHandler() = default;
  // Answers without blocking, or nullopt if answering needs to wait.
  virtual std::optional<WireMessage> try_handle(const WireMessage& request) = 0;
  virtual WireMessage handle_blocking(const WireMessage& request) = 0;
  // Makes pending handle_blocking() calls return soon (service shutdown).
  virtual void close() {}
};

class ZmqService {
 public:
  ZmqService(ZmqServiceOptions options, std::shared_ptr<ServiceHandler> handler);
  ~ZmqService();
  ZmqService(const ZmqService&) = delete;
  ZmqService& operator=(const ZmqService&) = delete;

  // The bound endpoint with its actual port, e.g. tcp://127.0.0.1:41234.
  const std::string& endpoint() const { return endpoint_; }
  // {"requests", "rejected", "errors", "bytes_in", "bytes_out"}.
  nlohmann::json metrics() const;

 private:
  struct Blocking {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  void serve();
  void handle(std::vector<zmq::message_t>& frames, zmq::socket_t& router);
  void send_reply(zmq::socket_t& socket, zmq::message_t& identity, const WireMessage& reply,
                  bool with_token);
  void reap_blocking(bool all);

  const ZmqServiceOptions options_;
  const std::shared_ptr<ServiceHandler> handler_;
  const std::string reply_endpoint_;  // inproc PUSH/PULL for blocking replies
  zmq::socket_t router_;
  zmq::socket_t replies_;
  std::string endpoint_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> requests_{0}, rejected_{0}, errors_{0}, bytes_in_{0}, bytes_out_{0};
  Mutex blocking_mutex_;
  std::vector<Blocking> blocking_ GUARDED_BY(blocking_mutex_);
  std::thread io_thread_;
};

}  // namespace aspen::dock
