// HttpEnvironment (kind "http"): an environment served over HTTP. Each reset() and step()
// POSTs environment_protocol.h's request object to the URL (Content-Type
// application/json, and "Authorization: Bearer <token>" when token_env names a set
// variable) and reads the reply object from a 200 response's body. The service tells
// episodes apart by the request's "episode" id: one service may hold many at once.
//
// Options:
//   url              http://host[:port]/path (https:// where cpp-httplib has TLS)
//   timeout_s        per call (connect, send and the whole reply), default 60
//   max_reply_bytes  per reply body, default 1 MiB
//   token_env        the environment variable holding a bearer token; default none
//
// Faults, each the trajectory's error (environment.h), never an exception or a hang:
//   kTimeout    no whole reply within timeout_s;
//   kCrash      no connection, or the connection closed before a reply;
//   kOversized  a body over max_reply_bytes (reading stops at the cap);
//   kRefused    a status other than 200 (its first 200 bytes quoted), {"error": ...},
//               or step() without an episode;
//   kGarbage    a 200 body that is not the protocol's JSON.
// Nothing is retried: a step is not idempotent (the service may have advanced the
// episode before the connection broke), so a fault ends the episode.
// Thread safety: as Environment; each call uses a connection of its own.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "aspen/agent/environment.h"
#include "aspen/agent/environment_protocol.h"
#include "aspen/agent/imports.h"

namespace aspen::agent {

struct HttpEnvironmentOptions {
  std::string url;
  double timeout_s = 60;
  size_t max_reply_bytes = size_t{1} << 20;
  std::string token_env;
};

class HttpEnvironment : public Environment {
 public:
  // Throws aspen::Error for a URL that is not http(s)://host..., or limits out of range.
  explicit HttpEnvironment(HttpEnvironmentOptions options);

  std::string kind() const override { return "http"; }
  ResetResult reset(const nlohmann::ordered_json& row) override;
  StepResult step(const std::string& turn) override;

 private:
  // POSTs one request and returns the reply body; sets `error` instead on a fault.
  std::string post(const std::string& body, std::optional<EnvironmentError>* error) const;

  HttpEnvironmentOptions options_;
  std::string source_;   // "http environment <url>", the start of every error message
  std::string origin_;   // scheme://host:port
  std::string path_;     // /path?query
  ProtocolEpisodes episodes_{source_};
};

}  // namespace aspen::agent
