// The HTTP seam between the controller runtime and the network. Everything above it (the
// REST client, informers, leader election) speaks HttpRequest/HttpResponse; the one
// production implementation (cpprest_transport.cc) is the only file that includes cpprest
// headers, so the HTTP library can be replaced without touching anything else.
//
// Transport failures (connection refused, TLS, timeouts) are Status values; an HTTP error
// status is a successful transport call whose response says so. A body longer than the
// config's max_response_bytes, or a streamed line longer than max_line_bytes, ends the request
// with kResourceExhausted: a misbehaving or hostile server cannot grow the process without bound.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "controller/rest_config.h"

namespace stasis {

struct HttpRequest {
  std::string method = "GET";  // GET, POST, PUT, PATCH, DELETE
  std::string path;            // path and query, already escaped: "/api/v1/...?limit=500"
  std::string body;
  std::string content_type = "application/json";
  // For Do(): the deadline of each network operation of the request (connect, write, read).
  // For Stream(): how long the stream may stay silent before it is dropped; must exceed the
  // server's watch timeout and bookmark interval, or idle watches are cut.
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
};

struct HttpResponse {
  int status = 0;
  std::string body;  // for Stream(): only set when the status is not 200
  std::string retry_after;  // the Retry-After header, "" when absent
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual Result<HttpResponse> Do(const HttpRequest& request) = 0;
  // Sends the request and hands each line of a 200 response to on_line as it arrives. Returns
  // when the server ends the stream, on_line returns false, or *cancel becomes true (checked at
  // least every 100 ms, also while no data arrives). kDeadlineExceeded when the stream was
  // silent for longer than request.timeout.
  virtual Result<HttpResponse> Stream(const HttpRequest& request,
                                      const std::function<bool(std::string_view line)>& on_line,
                                      const std::atomic<bool>* cancel) = 0;
  // "127.0.0.1:6443", for metrics labels.
  virtual std::string Host() const = 0;
};

std::unique_ptr<Transport> NewCpprestTransport(const RestConfig& config);

}  // namespace stasis
