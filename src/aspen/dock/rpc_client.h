// RpcClient: request/reply to one ZmqService over DEALER sockets. Each call takes
// a socket from a small pool (so concurrent callers do not serialize behind a
// blocking claim), sends the request with the shared token, and waits up to
// timeout_s + extra_wait_s for the reply. A socket that timed out is discarded, so
// a late reply can never be read as the answer to a later request.
// Errors: aspen::Error for a timeout, an undecodable or wrongly signed reply, or an
// error reply (its text is the problem; "rejected: ..." when the service refused
// the request itself).
// Thread safety: call() is thread-safe. Locking: mutex_ guards idle_.
#pragma once

#include <string>
#include <vector>
#include <zmq.hpp>

#include "aspen/dock/imports.h"
#include "aspen/dock/wire_format.h"
#include "aspen/util/mutex.h"

namespace aspen::dock {

struct RpcClientOptions {
  std::string endpoint;
  std::string token;
  double timeout_s = 30.0;
  size_t max_message_bytes = size_t{1} << 30;
};

class RpcClient {
 public:
  explicit RpcClient(RpcClientOptions options);
  ~RpcClient();
  // `extra_wait_s`: how long the service may legitimately block (a claim timeout).
  WireMessage call(const WireMessage& request, double extra_wait_s = 0.0);
  const std::string& endpoint() const { return options_.endpoint; }

 private:
  zmq::socket_t acquire();
  void release(zmq::socket_t socket);

  const RpcClientOptions options_;
  Mutex mutex_;
  std::vector<zmq::socket_t> idle_ GUARDED_BY(mutex_);
};

}  // namespace aspen::dock
