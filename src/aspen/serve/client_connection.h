// ClientConnection: whether the client of an HTTP request being answered is still
// connected, for a thread that waits on the engine for the client's samples.
//
// vLLM aborts a request whose client went away; so does `aspen serve`, for streaming
// and non-streaming requests alike, or abandoned requests would keep the engine busy.
// cpp-httplib 0.11 (Debian 12's) neither hands a handler its socket nor says whether
// the client left (later versions have Request::is_connection_closed), so the socket
// is found from the request's addresses: the open socket of this process whose local
// port and peer address and port are the request's. A TCP connection is unique by
// those, and httplib keeps the socket open until the handler has returned.
//
// Thread safety: closed() only reads the socket's state; call it from the thread that
// answers the request (the socket is valid only while that handler runs).
#pragma once

#include <string>

#include "aspen/serve/imports.h"

namespace aspen::serve {

class ClientConnection {
 public:
  ClientConnection() = default;  // no socket: closed() is always false
  // Finds the socket; if none matches (not expected), closed() is always false.
  ClientConnection(const std::string& remote_addr, int remote_port, int local_port);

  bool found() const { return fd_ >= 0; }
  // True once the client has closed or reset the connection. Bytes waiting to be read
  // (a pipelined next request) do not count as closing.
  bool closed() const;

 private:
  int fd_ = -1;
};

}  // namespace aspen::serve
