#include "aspen/dock/zmq_service.h"

#include <c10/util/Exception.h>

#include <zmq_addon.hpp>

#include "aspen/dock/imports.h"
#include "aspen/util/log.h"

namespace aspen::dock {

zmq::context_t& dock_zmq_context() {
  static zmq::context_t* context = new zmq::context_t(1);  // never destroyed: no exit races
  return *context;
}

namespace {

std::string unique_inproc_name(const void* owner) {
  static std::atomic<int64_t> counter{0};
  return "inproc://aspen-dock-replies-" + std::to_string(reinterpret_cast<uintptr_t>(owner)) + "-" +
         std::to_string(counter++);
}

// One line for the error reply and the log: a TORCH_CHECK's c10::Error carries a C++
// backtrace after its message, and a peer must learn nothing more than what failed.
std::string one_line(const std::exception& error) {
  std::string what;
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&error)) {
    what = c10_error->what_without_backtrace();
  } else {
    what = error.what();
  }
  const size_t end = what.find('\n');
  return end == std::string::npos ? what : what.substr(0, end);
}

size_t frames_bytes(const std::vector<zmq::message_t>& frames) {
  size_t total = 0;
  for (const zmq::message_t& frame : frames) total += frame.size();
  return total;
}

}  // namespace

ZmqService::ZmqService(ZmqServiceOptions options, std::shared_ptr<ServiceHandler> handler)
    : options_(std::move(options)),
      handler_(std::move(handler)),
      reply_endpoint_(unique_inproc_name(this)),
      router_(dock_zmq_context(), zmq::socket_type::router),
      replies_(dock_zmq_context(), zmq::socket_type::pull) {
  check_input(!options_.token.empty(), "empty token", "dock service",
              "every dock service requires a shared token");
  router_.set(zmq::sockopt::linger, 0);
  replies_.set(zmq::sockopt::linger, 0);
  try {
    router_.bind(options_.bind);
  } catch (const zmq::error_t& e) {
    throw Error(std::string("cannot bind: ") + e.what(), options_.bind);
  }
  endpoint_ = router_.get(zmq::sockopt::last_endpoint);
  replies_.bind(reply_endpoint_);
  io_thread_ = std::thread([this] { serve(); });
}

ZmqService::~ZmqService() {
  handler_->close();
  stop_ = true;
  io_thread_.join();
  reap_blocking(/*all=*/true);
}

nlohmann::json ZmqService::metrics() const {
  return {{"requests", requests_.load()},
          {"rejected", rejected_.load()},
          {"errors", errors_.load()},
          {"bytes_in", bytes_in_.load()},
          {"bytes_out", bytes_out_.load()}};
}

void ZmqService::send_reply(zmq::socket_t& socket, zmq::message_t& identity,
                            const WireMessage& reply, bool with_token) {
  std::vector<zmq::message_t> frames = encode_message(reply, with_token ? options_.token : "");
  bytes_out_ += static_cast<int64_t>(frames_bytes(frames));
  socket.send(identity, zmq::send_flags::sndmore);
  for (size_t i = 0; i < frames.size(); ++i) {
    socket.send(frames[i],
                i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
}

void ZmqService::handle(std::vector<zmq::message_t>& frames, zmq::socket_t& router) {
  requests_ += 1;
  bytes_in_ += static_cast<int64_t>(frames_bytes(frames));
  zmq::message_t identity = std::move(frames.front());
  frames.erase(frames.begin());
  WireMessage request;
  try {
    request = decode_message(frames, options_.token, options_.max_message_bytes);
  } catch (const Error& error) {
    rejected_ += 1;
    log_warn("dock service ", endpoint_, ": rejected a request: ", error.problem());
    send_reply(router, identity, error_message(0, "rejected: " + error.problem()),
               /*with_token=*/false);
    return;
  } catch (const std::exception& error) {  // e.g. std::bad_alloc: still only a rejection
    rejected_ += 1;
    log_warn("dock service ", endpoint_, ": rejected a request: ", one_line(error));
    send_reply(router, identity, error_message(0, "rejected: " + one_line(error)),
               /*with_token=*/false);
    return;
  }
  // Whatever a request makes a handler throw (an aspen::Error, a TORCH_CHECK on a
  // hostile tensor, an allocation failure) becomes an error reply: a peer, even one
  // holding the token, can fail its own request but never the service.
  std::optional<WireMessage> reply;
  try {
    reply = handler_->try_handle(request);
  } catch (const std::exception& error) {
    errors_ += 1;
    log_warn("dock service ", endpoint_, ": request op ", request.op, " failed: ", one_line(error));
    reply = error_message(request.op, one_line(error));
  }
  if (reply) {
    send_reply(router, identity, *reply, /*with_token=*/true);
    return;
  }
  // Would block: answer from a thread of its own.
  auto done = std::make_shared<std::atomic<bool>>(false);
  auto shared_identity = std::make_shared<zmq::message_t>(std::move(identity));
  auto shared_request = std::make_shared<WireMessage>(std::move(request));
  std::thread worker([this, done, shared_identity, shared_request] {
    WireMessage answer;
    try {
      answer = handler_->handle_blocking(*shared_request);
    } catch (const std::exception& error) {
      errors_ += 1;
      answer = error_message(shared_request->op, one_line(error));
    }
    zmq::socket_t push(dock_zmq_context(), zmq::socket_type::push);
    push.set(zmq::sockopt::linger, 0);
    push.connect(reply_endpoint_);
    std::vector<zmq::message_t> out = encode_message(answer, options_.token);
    push.send(*shared_identity, zmq::send_flags::sndmore);
    for (size_t i = 0; i < out.size(); ++i) {
      push.send(out[i], i + 1 < out.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
    *done = true;
  });
  MutexLock lock(blocking_mutex_);
  blocking_.push_back(Blocking{std::move(worker), done});
}

void ZmqService::reap_blocking(bool all) {
  MutexLock lock(blocking_mutex_);
  for (auto it = blocking_.begin(); it != blocking_.end();) {
    if (all || *it->done) {
      it->thread.join();
      it = blocking_.erase(it);
    } else {
      ++it;
    }
  }
}

void ZmqService::serve() {
  zmq::pollitem_t items[] = {{router_.handle(), 0, ZMQ_POLLIN, 0},
                             {replies_.handle(), 0, ZMQ_POLLIN, 0}};
  while (!stop_) {
    zmq::poll(items, 2, std::chrono::milliseconds(50));
    if (items[0].revents & ZMQ_POLLIN) {
      std::vector<zmq::message_t> frames;
      if (zmq::recv_multipart(router_, std::back_inserter(frames), zmq::recv_flags::dontwait)) {
        // The last line of defence of the I/O thread: a request that cannot even be
        // answered (no thread for a blocking op, an unsendable reply) is dropped.
        try {
          handle(frames, router_);
        } catch (const std::exception& error) {
          errors_ += 1;
          log_warn("dock service ", endpoint_, ": dropped a request: ", one_line(error));
        }
      }
    }
    if (items[1].revents & ZMQ_POLLIN) {
      std::vector<zmq::message_t> frames;
      if (zmq::recv_multipart(replies_, std::back_inserter(frames), zmq::recv_flags::dontwait)) {
        for (size_t i = 1; i < frames.size(); ++i) bytes_out_ += frames[i].size();
        for (size_t i = 0; i < frames.size(); ++i) {
          router_.send(frames[i],
                       i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
        }
      }
      reap_blocking(/*all=*/false);
    }
  }
}

}  // namespace aspen::dock
