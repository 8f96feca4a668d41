#include "aspen/agent/http_environment.h"

#include <httplib.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "aspen/agent/environment_protocol.h"
#include "aspen/agent/imports.h"
#include "aspen/util/error.h"
#include "aspen/util/seconds_since.h"

namespace aspen::agent {

HttpEnvironment::HttpEnvironment(HttpEnvironmentOptions options)
    : options_(std::move(options)), source_("http environment " + options_.url) {
  const std::string& url = options_.url;
  check_input(url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0,
              "\"" + url + "\" is not an http:// or https:// URL", "http environment: url");
  const size_t scheme_end = url.find("://") + 3;
  const size_t path_start = url.find('/', scheme_end);
  origin_ = url.substr(0, path_start);
  path_ = path_start == std::string::npos ? "/" : url.substr(path_start);
  check_input(origin_.size() > scheme_end, "no host in \"" + url + "\"", "http environment: url");
  check_input(
      std::isfinite(options_.timeout_s) && options_.timeout_s > 0 && options_.timeout_s <= 86400,
      "timeout_s must be in (0, 86400] seconds", source_);
  check_input(options_.max_reply_bytes >= 1024, "max_reply_bytes must be at least 1024", source_);
}

std::string HttpEnvironment::post(const std::string& body,
                                  std::optional<EnvironmentError>* error) const {
  httplib::Headers headers;
  if (!options_.token_env.empty()) {
    const char* token = std::getenv(options_.token_env.c_str());
    if (token == nullptr || *token == '\0') {
      *error = EnvironmentError{
          EnvironmentFault::kRefused,
          source_ + ": environment variable " + options_.token_env + " (token_env) is not set"};
      return {};
    }
    headers.emplace("Authorization", std::string("Bearer ") + token);
  }
  httplib::Client client(origin_);
  const auto timeout = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::duration<double>(options_.timeout_s));
  client.set_connection_timeout(timeout);
  client.set_read_timeout(timeout);
  client.set_write_timeout(timeout);
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + timeout;

  httplib::Request request;
  request.method = "POST";
  request.path = path_;
  request.headers = headers;
  request.body = body;
  request.set_header("Content-Type", "application/json");
  // The body is read through this receiver rather than whole: it stops at the size cap
  // and at the deadline (read_timeout alone restarts with every chunk a slow service
  // trickles).
  std::string reply;
  bool oversized = false;
  bool late = false;
  request.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    if (reply.size() + size > options_.max_reply_bytes) {
      oversized = true;
      return false;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      late = true;
      return false;
    }
    reply.append(data, size);
    return true;
  };
  httplib::Response response;
  httplib::Error failure = httplib::Error::Success;
  const bool sent = client.send(request, response, failure);
  if (oversized) {
    *error = EnvironmentError{
        EnvironmentFault::kOversized,
        source_ + ": a reply longer than " + std::to_string(options_.max_reply_bytes) + " bytes"};
  } else if (late || (!sent && seconds_since(start) >= options_.timeout_s)) {
    std::ostringstream seconds_text;  // "0.1", "60": as configured
    seconds_text << options_.timeout_s;
    *error = EnvironmentError{
        EnvironmentFault::kTimeout,
        source_ + ": no whole reply within the timeout of " + seconds_text.str() + " s"};
  } else if (!sent) {
    *error = EnvironmentError{EnvironmentFault::kCrash,
                              source_ + ": no reply (" + httplib::to_string(failure) + ")"};
  } else if (response.status != 200) {
    *error = EnvironmentError{EnvironmentFault::kRefused,
                              source_ + ": HTTP " + std::to_string(response.status) + ": " +
                                  (reply.size() > 200 ? reply.substr(0, 200) + "..." : reply)};
  }
  return error->has_value() ? std::string() : reply;
}

ResetResult HttpEnvironment::reset(const nlohmann::ordered_json& row) {
  return episodes_.reset(row, [this](const std::string& request, std::optional<EnvironmentError>* error) {
    return post(request, error);
  });
}

StepResult HttpEnvironment::step(const std::string& turn) {
  return episodes_.step(turn, [this](const std::string& request, std::optional<EnvironmentError>* error) {
    return post(request, error);
  });
}

}  // namespace aspen::agent
