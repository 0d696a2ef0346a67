// The process's small HTTP/1.1 server for Prometheus and the kubelet: /metrics (text format
// from a prometheus-cpp registry), /healthz (liveness) and /readyz (readiness, e.g. "caches
// synced"). Plain sockets and poll(2), one thread; no cpprest (only cpprest_transport.cc
// may include it) and no civetweb.
//
// Invariants: one request per connection, answered with "Connection: close"; a slow or
// silent client is dropped after its deadline and never delays the others (every socket is
// non-blocking and multiplexed on one poll loop); after Stop() returns, no thread and no
// socket of the server remain.
#pragma once

#include <prometheus/registry.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "base/status.h"

namespace stasis {

struct HttpEndpointsOptions {
  // "127.0.0.1:0", ":8080" (every interface), "[::1]:9090"; port 0 picks a free port.
  std::string address = ":8080";
  // Served on /metrics; nullptr = 404 there.
  std::shared_ptr<prometheus::Registry> registry;
  // /readyz: OK → 200 "ok"; otherwise 503 with the status message. nullptr = always ready.
  // Called on the server thread: keep it fast and non-blocking.
  std::function<Status()> readiness;
  // /healthz: same contract; nullptr = 200 "ok" while the process serves HTTP at all.
  std::function<Status()> liveness;
  // A connection that has not sent its request and read its answer within this is closed.
  std::chrono::milliseconds connection_deadline{std::chrono::seconds(10)};
};

class HttpEndpoints {
 public:
  // Binds and listens, then serves on its own thread. kInvalidArgument for a malformed
  // address, kUnavailable when the address cannot be bound (in use, not local).
  static Result<std::unique_ptr<HttpEndpoints>> Start(HttpEndpointsOptions options);
  ~HttpEndpoints();  // Stop()
  HttpEndpoints(const HttpEndpoints&) = delete;
  HttpEndpoints& operator=(const HttpEndpoints&) = delete;

  // The bound port (the ephemeral one when the address asked for port 0).
  int port() const { return port_; }
  // Closes the listener and every open connection, and joins the thread. Idempotent.
  void Stop();

 private:
  HttpEndpoints(HttpEndpointsOptions options, int listen_fd, int port, int wake_fd);
  void Serve();

  struct Response {
    int code;
    std::string content_type;
    std::string body;
  };
  Response Handle(const std::string& method, const std::string& path);

  HttpEndpointsOptions options_;
  int listen_fd_;
  int port_;
  int wake_fd_;  // an eventfd: Stop() writes to it to end the poll loop
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace stasis
