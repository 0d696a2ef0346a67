#include "controller/http_endpoints.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <prometheus/text_serializer.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <pthread.h>
#include <strings.h>

#include <cerrno>
#include <csignal>
#include <chrono>
#include <cstring>
#include <functional>
#include <list>
#include <optional>
#include <vector>

namespace stasis {
namespace {

using SteadyTime = std::chrono::steady_clock::time_point;

// Requests here are a line and a few headers; anything larger is not a probe or a scrape.
constexpr size_t kMaxRequestBytes = 16 * 1024;

struct Connection {
  uint64_t id = 0;
  int fd = -1;
  SteadyTime deadline;
  std::unique_ptr<TlsSession> tls;  // nullptr: plain HTTP
  std::string in;
  std::string out;
  size_t out_off = 0;
  bool writing = false;
  bool waiting = false;  // for the metrics filter's decision
  std::string method;    // of the request waiting
  short events = POLLIN;  // what the next step waits for (TLS may read to write, and back)
};

const char* ReasonPhrase(int code) {
  switch (code) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

std::string Render(int code, const std::string& content_type, const std::string& body, bool head) {
  std::string r = "HTTP/1.1 " + std::to_string(code) + " " + ReasonPhrase(code) + "\r\n";
  r += "Content-Type: " + content_type + "\r\n";
  r += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  if (code == 401) r += "WWW-Authenticate: Bearer\r\n";
  r += "Connection: close\r\n\r\n";
  if (!head) r += body;
  return r;
}

void CloseConnection(Connection& c) {
  c.tls.reset();  // close_notify before the socket goes
  close(c.fd);
}

// Closes connections past their deadline: a silent client must not hold a socket forever.
void DropExpired(std::list<Connection>& conns, SteadyTime now) {
  for (auto it = conns.begin(); it != conns.end();) {
    if (now >= it->deadline) {
      CloseConnection(*it);
      it = conns.erase(it);
    } else {
      ++it;
    }
  }
}

// Fills `fds` (the fixed fds, then one per connection, whose iterators go to `owners` in the
// same order); returns the poll timeout: until the nearest deadline. A connection waiting for
// a decision is polled for nothing (hang-ups and errors are reported anyway).
int BuildPollSet(const std::vector<int>& fixed, std::list<Connection>& conns, SteadyTime now,
                 std::vector<pollfd>& fds, std::vector<std::list<Connection>::iterator>& owners) {
  fds.clear();
  owners.clear();
  for (int fd : fixed) fds.push_back({fd, POLLIN, 0});
  int timeout_ms = -1;
  for (auto it = conns.begin(); it != conns.end(); ++it) {
    fds.push_back({it->fd, static_cast<short>(it->waiting ? 0 : it->events), 0});
    owners.push_back(it);
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(it->deadline - now);
    int ms = static_cast<int>(std::max<int64_t>(left.count(), 0)) + 1;
    timeout_ms = timeout_ms < 0 ? ms : std::min(timeout_ms, ms);
  }
  return timeout_ms;
}

void AcceptAll(int listen_fd, SteadyTime deadline, const TlsServerContext* tls, uint64_t& next_id,
               std::list<Connection>& conns) {
  while (true) {
    int cfd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (cfd < 0) break;  // EAGAIN: accepted everything pending (or a transient error)
    Connection c;
    c.id = next_id++;
    c.fd = cfd;
    c.deadline = deadline;
    if (tls != nullptr && (c.tls = tls->NewSession(cfd)) == nullptr) {
      close(cfd);
      continue;
    }
    conns.push_back(std::move(c));
  }
}

struct Request {
  std::string method, path, authorization;
};

// The answer to a request, or nullopt when it waits for a decision (connection `id`).
using Router = std::function<std::optional<std::string>(const Request& request, uint64_t id)>;

// The Authorization header's value, "" when absent.
std::string Authorization(const std::string& in) {
  for (size_t pos = in.find('\n'); pos != std::string::npos; pos = in.find('\n', pos + 1)) {
    const std::string name = "authorization:";
    if (in.size() - pos - 1 < name.size()) break;
    if (strncasecmp(in.c_str() + pos + 1, name.c_str(), name.size()) != 0) continue;
    std::string value = in.substr(pos + 1 + name.size(), in.find('\n', pos + 1) - pos - 1 - name.size());
    value.erase(0, value.find_first_not_of(" \t"));
    value.erase(value.find_last_not_of(" \t\r") + 1);
    return value;
  }
  return "";
}

// Once the request's headers are complete: its answer, from "GET /path?query HTTP/1.1".
std::optional<std::string> AnswerRequest(const std::string& in, uint64_t id, const Router& route) {
  std::string line = in.substr(0, in.find_first_of("\r\n"));
  auto sp1 = line.find(' ');
  auto sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string::npos || sp2 == std::string::npos) {
    return Render(400, "text/plain; charset=utf-8", "bad request\n", false);
  }
  std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  return route({line.substr(0, sp1), target.substr(0, target.find('?')), Authorization(in)}, id);
}

// One non-blocking read or write on the connection, plain or TLS.
IoStep ReadSome(Connection& c, char* buf, size_t len) {
  if (c.tls) return c.tls->Read(buf, len);
  ssize_t r = read(c.fd, buf, len);
  if (r > 0) return {static_cast<size_t>(r), IoStep::kDone};
  if (r < 0 && (errno == EAGAIN || errno == EINTR)) return {0, IoStep::kRead};
  return {0, IoStep::kClosed};
}

IoStep WriteSome(Connection& c, const char* buf, size_t len) {
  if (c.tls) return c.tls->Write(buf, len);
  ssize_t w = send(c.fd, buf, len, MSG_NOSIGNAL);
  if (w > 0) return {static_cast<size_t>(w), IoStep::kDone};
  if (w < 0 && (errno == EAGAIN || errno == EINTR)) return {0, IoStep::kWrite};
  return {0, IoStep::kClosed};
}

short EventsFor(IoStep::Want want) { return want == IoStep::kWrite ? POLLOUT : POLLIN; }

// Reads what the client sent (until the socket has no more: TLS may hold decrypted bytes poll
// cannot see); once the headers are complete (or too large) the answer is queued, or the
// request waits for a decision. False when the client went away before sending a whole request.
bool ReadRequest(Connection& c, const Router& route) {
  char buf[4096];
  while (true) {
    IoStep s = ReadSome(c, buf, sizeof buf);
    if (s.want == IoStep::kClosed) return false;
    if (s.want != IoStep::kDone) {
      c.events = EventsFor(s.want);
      return true;
    }
    c.in.append(buf, s.bytes);
    auto end = c.in.find("\r\n\r\n");
    if (end == std::string::npos) end = c.in.find("\n\n");
    if (end != std::string::npos) {
      std::optional<std::string> answer = AnswerRequest(c.in, c.id, route);
      c.waiting = !answer.has_value();
      if (c.waiting) c.method = c.in.substr(0, c.in.find(' '));
      c.out = answer.value_or("");
      c.writing = !c.waiting;
      return true;
    }
    if (c.in.size() > kMaxRequestBytes) {
      c.out = Render(431, "text/plain; charset=utf-8", "request too large\n", false);
      c.writing = true;
      return true;
    }
  }
}

// Sends what the socket takes of the answer. False when the connection is done: all sent
// (Connection: close) or the client went away.
bool WriteAnswer(Connection& c) {
  while (c.out_off < c.out.size()) {
    IoStep s = WriteSome(c, c.out.data() + c.out_off, c.out.size() - c.out_off);
    if (s.want == IoStep::kClosed) return false;
    if (s.want != IoStep::kDone) {
      c.events = EventsFor(s.want);
      return true;
    }
    c.out_off += s.bytes;
  }
  return false;
}

// One poll event on a connection; false when it is to be closed.
bool Advance(Connection& c, short revents, const Router& route) {
  if (c.waiting) return (revents & (POLLHUP | POLLERR | POLLNVAL)) == 0;
  if (!c.writing && !ReadRequest(c, route)) return false;
  // Try to write at once: the answer usually fits the socket buffer in one go.
  if (c.writing) return WriteAnswer(c);
  return true;
}

// Hands each decision to its connection (gone already when its deadline passed); an admitted
// request gets `answer`'s /metrics.
void Deliver(std::vector<std::pair<uint64_t, Admission>> decisions, std::list<Connection>& conns,
             const std::function<std::string(const std::string& method)>& metrics) {
  for (auto& [id, admission] : decisions) {
    for (auto& c : conns) {
      if (c.id != id || !c.waiting) continue;
      c.waiting = false;
      c.writing = true;
      c.events = POLLOUT;
      c.out = admission.http_code == 200
                  ? metrics(c.method)
                  : Render(admission.http_code, "text/plain; charset=utf-8", admission.message,
                           c.method == "HEAD");
    }
  }
}

// "host:port" / ":port" / "[v6]:port" → (host, port); host "" = every interface.
Result<std::pair<std::string, std::string>> SplitAddress(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos) {
    return Status(Code::kInvalidArgument, "address \"" + address + "\": want host:port");
  }
  std::string host = address.substr(0, colon), port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (port.empty() || port.find_first_not_of("0123456789") != std::string::npos ||
      port.size() > 5 || std::stoi(port) > 65535) {
    return Status(Code::kInvalidArgument, "address \"" + address + "\": bad port");
  }
  return std::make_pair(host, port);
}

// Binds a listening socket; every interface, dual-stack, for an empty host.
Result<int> Listen(const std::string& address) {
  auto split = SplitAddress(address);
  if (!split.ok()) return split.status();
  auto [host, port] = *split;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  hints.ai_family = AF_UNSPEC;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) {
    return Status(Code::kInvalidArgument,
                  "address \"" + address + "\": " + std::string(gai_strerror(rc)));
  }
  // With a null host, getaddrinfo lists the IPv6 wildcard first where IPv6 exists: bound
  // dual-stack it serves IPv4 too (like Go's ":8080"); without IPv6 the IPv4 one binds.
  std::string last_error = "no address";
  int fd = -1;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    int one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ai->ai_family == AF_INET6 && host.empty()) {
      setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    }
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 128) == 0) break;
    last_error = std::strerror(errno);
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd < 0) {
    return Status(Code::kUnavailable, "listen on \"" + address + "\": " + last_error);
  }
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return -1;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
}

}  // namespace

Result<std::unique_ptr<HttpEndpoints>> HttpEndpoints::Start(HttpEndpointsOptions options) {
  auto fd = Listen(options.address);
  if (!fd.ok()) return fd.status();
  int wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  int done = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake < 0 || done < 0) {
    const std::string error = std::strerror(errno);
    for (int f : {*fd, wake, done}) {
      if (f >= 0) close(f);
    }
    return Status(Code::kInternal, "eventfd: " + error);
  }
  int port = BoundPort(*fd);
  spdlog::info("component=http_endpoints op=listen address={} port={} tls={} authorized_metrics={}",
               options.address, port, options.tls != nullptr, options.metrics_filter != nullptr);
  return std::unique_ptr<HttpEndpoints>(
      new HttpEndpoints(std::move(options), *fd, port, wake, done));
}

HttpEndpoints::HttpEndpoints(HttpEndpointsOptions options, int listen_fd, int port, int wake_fd,
                             int done_fd)
    : options_(std::move(options)),
      listen_fd_(listen_fd),
      port_(port),
      wake_fd_(wake_fd),
      done_fd_(done_fd) {
  if (options_.metrics_filter) review_thread_ = std::thread([this] { Review(); });
  thread_ = std::thread([this] { Serve(); });
}

HttpEndpoints::~HttpEndpoints() { Stop(); }

void HttpEndpoints::Stop() {
  if (stopping_.exchange(true)) return;  // already stopped (or stopping on another thread)
  uint64_t one = 1;
  [[maybe_unused]] auto n = write(wake_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard<std::mutex> lock(review_mu_);
    reviews_stop_ = true;
  }
  review_cv_.notify_all();
  // A review in flight ends within its own deadline (MetricsAuthorizerOptions::review_timeout).
  if (review_thread_.joinable()) review_thread_.join();
  close(listen_fd_);
  close(wake_fd_);
  close(done_fd_);
  spdlog::info("component=http_endpoints op=stop port={}", port_);
}

bool HttpEndpoints::EnqueueReview(uint64_t connection, const std::string& authorization) {
  {
    std::lock_guard<std::mutex> lock(review_mu_);
    if (reviews_.size() >= kMaxPendingReviews) return false;
    reviews_.emplace_back(connection, authorization);
  }
  review_cv_.notify_one();
  return true;
}

void HttpEndpoints::Review() {
  std::unique_lock<std::mutex> lock(review_mu_);
  while (true) {
    review_cv_.wait(lock, [this] { return reviews_stop_ || !reviews_.empty(); });
    if (reviews_stop_) return;
    auto [id, authorization] = std::move(reviews_.front());
    reviews_.pop_front();
    lock.unlock();
    Admission admission = options_.metrics_filter(authorization);
    lock.lock();
    decisions_.emplace_back(id, std::move(admission));
    uint64_t one = 1;
    [[maybe_unused]] auto n = write(done_fd_, &one, sizeof one);
  }
}

std::vector<std::pair<uint64_t, Admission>> HttpEndpoints::TakeDecisions() {
  uint64_t count;
  [[maybe_unused]] auto n = read(done_fd_, &count, sizeof count);
  std::lock_guard<std::mutex> lock(review_mu_);
  return std::exchange(decisions_, {});
}

HttpEndpoints::Response HttpEndpoints::Handle(const std::string& method, const std::string& path) {
  const std::string kText = "text/plain; charset=utf-8";
  if (method != "GET" && method != "HEAD") return {405, kText, "method not allowed\n"};
  auto check = [&](const std::function<Status()>& probe) -> Response {
    Status s = probe ? probe() : OkStatus();
    if (s.ok()) return {200, kText, "ok"};
    return {503, kText, s.message()};
  };
  if (options_.serve_probes) {
    if (path == "/healthz" || path == "/livez") return check(options_.liveness);
    if (path == "/readyz") return check(options_.readiness);
  }
  if (path == "/metrics" && options_.registry) {
    prometheus::TextSerializer serializer;
    return {200, "text/plain; version=0.0.4; charset=utf-8",
            serializer.Serialize(options_.registry->Collect())};
  }
  return {404, kText, "404 page not found\n"};
}

std::string HttpEndpoints::Answer(const std::string& method, const std::string& path) {
  const Response resp = Handle(method, path);
  return Render(resp.code, resp.content_type, resp.body, method == "HEAD");
}

void HttpEndpoints::Serve() {
  // OpenSSL writes with write(2), not send(MSG_NOSIGNAL): a client gone mid-answer must not
  // kill the process with SIGPIPE. Blocked on this thread only; it stays pending, harmless.
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  // std::list: poll results index connections; erasing one keeps the others' addresses.
  std::list<Connection> conns;
  std::vector<pollfd> fds;
  std::vector<std::list<Connection>::iterator> owners;
  uint64_t next_id = 1;
  const Router route = [this](const Request& r, uint64_t id) -> std::optional<std::string> {
    const bool allowed_method = r.method == "GET" || r.method == "HEAD";
    if (allowed_method && r.path == "/metrics" && options_.registry && options_.metrics_filter) {
      if (EnqueueReview(id, r.authorization)) return std::nullopt;
      return Render(503, "text/plain; charset=utf-8", "too many scrapes waiting\n", false);
    }
    return Answer(r.method, r.path);
  };
  const std::vector<int> fixed = {wake_fd_, listen_fd_, done_fd_};
  while (!stopping_.load()) {
    auto now = std::chrono::steady_clock::now();
    DropExpired(conns, now);
    const int timeout_ms = BuildPollSet(fixed, conns, now, fds, owners);
    int n = poll(fds.data(), fds.size(), timeout_ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      spdlog::error("component=http_endpoints op=poll error=\"{}\"", std::strerror(errno));
      break;
    }
    if (fds[0].revents) break;  // Stop()
    // The poll may have slept for hours: a new connection's deadline counts from now, not from
    // before the poll (else the first request after an idle spell is closed unanswered).
    now = std::chrono::steady_clock::now();
    if (fds[1].revents & POLLIN) {
      AcceptAll(listen_fd_, now + options_.connection_deadline, options_.tls.get(), next_id, conns);
    }
    for (size_t i = fixed.size(); i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      auto it = owners[i - fixed.size()];
      if (!Advance(*it, fds[i].revents, route)) {
        CloseConnection(*it);
        conns.erase(it);
      }
    }
    if (fds[2].revents & POLLIN) {
      Deliver(TakeDecisions(), conns, [this](const std::string& m) { return Answer(m, "/metrics"); });
    }
  }
  for (auto& c : conns) CloseConnection(c);
}

}  // namespace stasis
