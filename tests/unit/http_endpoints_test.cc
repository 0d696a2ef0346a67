// The metrics and health server over real loopback sockets, spoken to by a raw client:
// status lines, bodies, readiness flips, 404, a silent client that must not block others.
#include "controller/http_endpoints.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <thread>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>

#include "controller/metrics.h"
#include "controller/work_queue.h"

namespace stasis {
namespace {

using namespace std::chrono_literals;

struct RawResponse {
  int code = 0;
  std::string headers;
  std::string body;
};

int Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Sends `request` verbatim and reads until the server closes the connection.
RawResponse Send(int port, const std::string& request) {
  RawResponse r;
  int fd = Connect(port);
  if (fd < 0) return r;
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  [[maybe_unused]] auto w = write(fd, request.data(), request.size());
  std::string all;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) all.append(buf, static_cast<size_t>(n));
  close(fd);
  auto split = all.find("\r\n\r\n");
  if (all.rfind("HTTP/1.1 ", 0) != 0 || split == std::string::npos) return r;
  r.code = std::stoi(all.substr(9, 3));
  r.headers = all.substr(0, split);
  r.body = all.substr(split + 4);
  return r;
}

RawResponse Get(int port, const std::string& path) {
  return Send(port, "GET " + path + " HTTP/1.1\r\nHost: localhost\r\nUser-Agent: test\r\n\r\n");
}

class HttpEndpointsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    metrics_.RegisterController("actors");
    HttpEndpointsOptions o;
    o.address = "127.0.0.1:0";
    o.registry = metrics_.registry();
    o.readiness = [this]() -> Status {
      if (ready_.load()) return OkStatus();
      return Status(Code::kUnavailable, "informer actors: cache not synced");
    };
    auto server = HttpEndpoints::Start(std::move(o));
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    ASSERT_GT(server_->port(), 0);
  }

  Metrics metrics_;
  std::atomic<bool> ready_{false};
  std::unique_ptr<HttpEndpoints> server_;
};

TEST_F(HttpEndpointsTest, HealthzIsOk) {
  auto r = Get(server_->port(), "/healthz");
  EXPECT_EQ(r.code, 200);
  EXPECT_EQ(r.body, "ok");
  EXPECT_NE(r.headers.find("Connection: close"), std::string::npos);
  EXPECT_NE(r.headers.find("Content-Length: 2"), std::string::npos);
}

TEST_F(HttpEndpointsTest, ReadyzFollowsTheReadinessCallback) {
  auto not_ready = Get(server_->port(), "/readyz");
  EXPECT_EQ(not_ready.code, 503);
  EXPECT_EQ(not_ready.body, "informer actors: cache not synced");
  ready_ = true;
  auto ready = Get(server_->port(), "/readyz?verbose=1");  // query strings are ignored
  EXPECT_EQ(ready.code, 200);
  EXPECT_EQ(ready.body, "ok");
}

TEST_F(HttpEndpointsTest, MetricsServesThePrometheusTextFormat) {
  metrics_.ObserveReconcile("actors", ReconcileResult::kSuccess, 0.02);
  metrics_.ObserveReconcile("actors", ReconcileResult::kError, 0.3);
  WorkQueueOptions qo;
  qo.name = "actors";
  qo.metrics = &metrics_;
  WorkQueue queue(std::move(qo));
  queue.Add("ns/a");
  metrics_.RestClientObserver("127.0.0.1:6443")("GET", "200");
  metrics_.SetLeaderStatus("stasis-controller", true);

  auto r = Get(server_->port(), "/metrics");
  ASSERT_EQ(r.code, 200);
  EXPECT_NE(r.headers.find("Content-Type: text/plain; version=0.0.4"), std::string::npos);
  for (const char* want : {
           "# TYPE controller_runtime_reconcile_total counter",
           "controller_runtime_reconcile_total{controller=\"actors\",result=\"success\"} 1",
           "controller_runtime_reconcile_total{controller=\"actors\",result=\"error\"} 1",
           // pre-created at 0 by RegisterController
           "controller_runtime_reconcile_total{controller=\"actors\",result=\"requeue_after\"} 0",
           "controller_runtime_reconcile_errors_total{controller=\"actors\"} 1",
           "controller_runtime_reconcile_time_seconds_bucket{controller=\"actors\",le=\"0.025\"} 1",
           "controller_runtime_reconcile_time_seconds_count{controller=\"actors\"} 2",
           "workqueue_depth{controller=\"actors\",name=\"actors\"} 1",
           "workqueue_adds_total{controller=\"actors\",name=\"actors\"} 1",
           "# TYPE workqueue_queue_duration_seconds histogram",
           "workqueue_work_duration_seconds_bucket{controller=\"actors\",name=\"actors\",le=\"1e-"
           "08\"}",
           "workqueue_retries_total{controller=\"actors\",name=\"actors\"} 0",
           "workqueue_unfinished_work_seconds{controller=\"actors\",name=\"actors\"}",
           "workqueue_longest_running_processor_seconds{controller=\"actors\",name=\"actors\"}",
           "rest_client_requests_total{code=\"200\",host=\"127.0.0.1:6443\",method=\"GET\"} 1",
           "leader_election_master_status{name=\"stasis-controller\"} 1",
       }) {
    EXPECT_NE(r.body.find(want), std::string::npos) << "missing: " << want << "\n" << r.body;
  }
}

TEST_F(HttpEndpointsTest, UnknownPathIs404AndOtherMethods405) {
  EXPECT_EQ(Get(server_->port(), "/nope").code, 404);
  EXPECT_EQ(Get(server_->port(), "/").code, 404);
  auto post = Send(server_->port(), "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(post.code, 405);
  auto garbage = Send(server_->port(), "nonsense\r\n\r\n");
  EXPECT_EQ(garbage.code, 400);
}

TEST_F(HttpEndpointsTest, HeadHasHeadersButNoBody) {
  auto r = Send(server_->port(), "HEAD /healthz HTTP/1.1\r\n\r\n");
  EXPECT_EQ(r.code, 200);
  EXPECT_EQ(r.body, "");
  EXPECT_NE(r.headers.find("Content-Length: 2"), std::string::npos);
}

TEST_F(HttpEndpointsTest, ASilentClientDoesNotBlockOthers) {
  int idle = Connect(server_->port());  // connects, never sends
  ASSERT_GE(idle, 0);
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(Get(server_->port(), "/healthz").code, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  close(idle);
}

TEST_F(HttpEndpointsTest, StopClosesTheListener) {
  int port = server_->port();
  server_->Stop();
  server_->Stop();  // idempotent
  EXPECT_LT(Connect(port), 0);
}

TEST(HttpEndpointsAddressTest, RejectsMalformedAddresses) {
  for (const char* bad : {"nocolon", "127.0.0.1:", "127.0.0.1:99999", "127.0.0.1:http"}) {
    HttpEndpointsOptions o;
    o.address = bad;
    auto r = HttpEndpoints::Start(std::move(o));
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << bad;
  }
}

TEST(HttpEndpointsAddressTest, PortInUseIsUnavailable) {
  HttpEndpointsOptions first;
  first.address = "127.0.0.1:0";
  auto a = HttpEndpoints::Start(std::move(first));
  ASSERT_TRUE(a.ok());
  HttpEndpointsOptions second;
  second.address = "127.0.0.1:" + std::to_string((*a)->port());
  auto b = HttpEndpoints::Start(std::move(second));
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), Code::kUnavailable);
}

TEST(HttpEndpointsAddressTest, EmptyHostListensOnEveryInterface) {
  HttpEndpointsOptions o;
  o.address = ":0";
  auto r = HttpEndpoints::Start(std::move(o));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Get((*r)->port(), "/healthz").code, 200);  // reachable over IPv4 loopback
}

}  // namespace
}  // namespace stasis

namespace stasis {
namespace {

// Regression: a request arriving after the server sat idle for longer than the connection
// deadline was closed unanswered, because the deadline was counted from before the idle poll.
TEST(HttpEndpointsIdleTest, FirstRequestAfterAnIdleSpellIsAnswered) {
  HttpEndpointsOptions o;
  o.address = "127.0.0.1:0";
  o.connection_deadline = std::chrono::milliseconds(200);
  auto server = HttpEndpoints::Start(std::move(o));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // idle: longer than the deadline
  auto r = Get((*server)->port(), "/healthz");
  EXPECT_EQ(r.code, 200);
  EXPECT_EQ(r.body, "ok");
}

}  // namespace
}  // namespace stasis
