// The process's small HTTP/1.1 server for Prometheus and the kubelet: /metrics (text format
// from a prometheus-cpp registry), /healthz (liveness) and /readyz (readiness, e.g. "caches
// synced"). Plain sockets and poll(2), one thread; no cpprest (only cpprest_transport.cc
// may include it) and no civetweb.
//
// With `tls`, every connection speaks TLS (OpenSSL, non-blocking on the same poll loop; plain
// HTTP to the port fails the handshake). With `metrics_filter`, /metrics is answered only once
// the filter admits the request's Authorization header (metrics_authorizer.h: TokenReview and
// SubjectAccessReview). The filter may wait on the API server, so it runs on a review thread
// of its own, never on the poll loop: probes, handshakes and other scrapes go on meanwhile; a
// waiting connection keeps its deadline. A worker thread rather than a short deadline on the
// loop, because a deadline short enough not to stall the kubelet's probes would fail scrapes
// whenever the API server is merely slow.
//
// Invariants: one request per connection, answered with "Connection: close"; a slow or
// silent client is dropped after its deadline and never delays the others (every socket is
// non-blocking and multiplexed on one poll loop); at most kMaxPendingReviews requests wait for
// the filter (beyond, 503 at once); after Stop() returns, no thread and no socket of the
// server remain.
#pragma once

#include <prometheus/registry.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/status.h"
#include "controller/metrics_authorizer.h"
#include "controller/tls_server.h"

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
  // Set: TLS on every connection.
  std::shared_ptr<TlsServerContext> tls;
  // Set: decides, from the Authorization header ("" when absent), whether /metrics is
  // answered (200) or refused with its code. Called on the review thread; may block.
  std::function<Admission(const std::string& authorization)> metrics_filter;
  // False: /healthz, /livez and /readyz are 404 here (they are served elsewhere).
  bool serve_probes = true;
};

class HttpEndpoints {
 public:
  // Binds and listens, then serves on its own thread. kInvalidArgument for a malformed
  // address, kUnavailable when the address cannot be bound (in use, not local).
  static Result<std::unique_ptr<HttpEndpoints>> Start(HttpEndpointsOptions options);
  ~HttpEndpoints();  // Stop()
  HttpEndpoints(const HttpEndpoints&) = delete;
  HttpEndpoints& operator=(const HttpEndpoints&) = delete;

  static constexpr size_t kMaxPendingReviews = 64;

  // The bound port (the ephemeral one when the address asked for port 0).
  int port() const { return port_; }
  // Closes the listener and every open connection, and joins the thread. Idempotent.
  void Stop();

 private:
  HttpEndpoints(HttpEndpointsOptions options, int listen_fd, int port, int wake_fd, int done_fd);
  void Serve();
  // The review thread: runs metrics_filter on queued requests, hands decisions back.
  void Review();
  // False when the queue is full.
  bool EnqueueReview(uint64_t connection, const std::string& authorization);
  std::vector<std::pair<uint64_t, Admission>> TakeDecisions();

  struct Response {
    int code;
    std::string content_type;
    std::string body;
  };
  Response Handle(const std::string& method, const std::string& path);
  std::string Answer(const std::string& method, const std::string& path);  // rendered

  HttpEndpointsOptions options_;
  int listen_fd_;
  int port_;
  int wake_fd_;  // an eventfd: Stop() writes to it to end the poll loop
  int done_fd_;  // an eventfd: the review thread writes to it when a decision is ready
  std::atomic<bool> stopping_{false};
  std::thread thread_;

  std::mutex review_mu_;
  std::condition_variable review_cv_;
  std::deque<std::pair<uint64_t, std::string>> reviews_;       // connection id, Authorization
  std::vector<std::pair<uint64_t, Admission>> decisions_;      // connection id, decision
  bool reviews_stop_ = false;
  std::thread review_thread_;
};

}  // namespace stasis
