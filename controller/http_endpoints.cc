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

#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <list>
#include <vector>

namespace stasis {
namespace {

using SteadyTime = std::chrono::steady_clock::time_point;

// Requests here are a line and a few headers; anything larger is not a probe or a scrape.
constexpr size_t kMaxRequestBytes = 16 * 1024;

struct Connection {
  int fd;
  SteadyTime deadline;
  std::string in;
  std::string out;
  size_t out_off = 0;
  bool writing = false;
};

const char* ReasonPhrase(int code) {
  switch (code) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
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
  r += "Connection: close\r\n\r\n";
  if (!head) r += body;
  return r;
}

// Closes connections past their deadline: a silent client must not hold a socket forever.
void DropExpired(std::list<Connection>& conns, SteadyTime now) {
  for (auto it = conns.begin(); it != conns.end();) {
    if (now >= it->deadline) {
      close(it->fd);
      it = conns.erase(it);
    } else {
      ++it;
    }
  }
}

// Fills `fds` (the wake fd, the listener, then one per connection, whose iterators go to
// `owners` in the same order); returns the poll timeout: until the nearest deadline.
int BuildPollSet(int wake_fd, int listen_fd, std::list<Connection>& conns, SteadyTime now,
                 std::vector<pollfd>& fds, std::vector<std::list<Connection>::iterator>& owners) {
  fds.clear();
  owners.clear();
  fds.push_back({wake_fd, POLLIN, 0});
  fds.push_back({listen_fd, POLLIN, 0});
  int timeout_ms = -1;
  for (auto it = conns.begin(); it != conns.end(); ++it) {
    fds.push_back({it->fd, static_cast<short>(it->writing ? POLLOUT : POLLIN), 0});
    owners.push_back(it);
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(it->deadline - now);
    int ms = static_cast<int>(std::max<int64_t>(left.count(), 0)) + 1;
    timeout_ms = timeout_ms < 0 ? ms : std::min(timeout_ms, ms);
  }
  return timeout_ms;
}

void AcceptAll(int listen_fd, SteadyTime deadline, std::list<Connection>& conns) {
  while (true) {
    int cfd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (cfd < 0) break;  // EAGAIN: accepted everything pending (or a transient error)
    conns.push_back(Connection{cfd, deadline, {}, {}, 0, false});
  }
}

// The rendered answer to a request (method, path without its query).
using RenderFor = std::function<std::string(const std::string& method, const std::string& path)>;

// Once the request's headers are complete: its answer, from "GET /path?query HTTP/1.1".
std::string AnswerRequest(const std::string& in, const RenderFor& answer) {
  std::string line = in.substr(0, in.find_first_of("\r\n"));
  auto sp1 = line.find(' ');
  auto sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string::npos || sp2 == std::string::npos) {
    return Render(400, "text/plain; charset=utf-8", "bad request\n", false);
  }
  std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  return answer(line.substr(0, sp1), target.substr(0, target.find('?')));
}

// Reads what the client sent; once the headers are complete (or too large) the answer is
// queued. False when the client went away before sending a whole request.
bool ReadRequest(Connection& c, const RenderFor& answer) {
  char buf[4096];
  ssize_t r = read(c.fd, buf, sizeof buf);
  if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) return false;
  if (r < 0) return true;
  c.in.append(buf, static_cast<size_t>(r));
  auto end = c.in.find("\r\n\r\n");
  if (end == std::string::npos) end = c.in.find("\n\n");
  if (end != std::string::npos) {
    c.out = AnswerRequest(c.in, answer);
    c.writing = true;
  } else if (c.in.size() > kMaxRequestBytes) {
    c.out = Render(431, "text/plain; charset=utf-8", "request too large\n", false);
    c.writing = true;
  }
  return true;
}

// Sends what the socket takes of the answer. False when the connection is done: all sent
// (Connection: close) or the client went away.
bool WriteAnswer(Connection& c) {
  while (c.out_off < c.out.size()) {
    ssize_t w = send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
    if (w > 0) {
      c.out_off += static_cast<size_t>(w);
    } else {
      if (w < 0 && (errno == EAGAIN || errno == EINTR)) break;
      return false;
    }
  }
  return c.out_off < c.out.size();
}

// One poll event on a connection; false when it is to be closed.
bool Advance(Connection& c, const RenderFor& answer) {
  if (!c.writing && !ReadRequest(c, answer)) return false;
  // Try to write at once: the answer usually fits the socket buffer in one go.
  if (c.writing) return WriteAnswer(c);
  return true;
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
  if (wake < 0) {
    close(*fd);
    return Status(Code::kInternal, std::string("eventfd: ") + std::strerror(errno));
  }
  int port = BoundPort(*fd);
  spdlog::info("component=http_endpoints op=listen address={} port={}", options.address, port);
  return std::unique_ptr<HttpEndpoints>(new HttpEndpoints(std::move(options), *fd, port, wake));
}

HttpEndpoints::HttpEndpoints(HttpEndpointsOptions options, int listen_fd, int port, int wake_fd)
    : options_(std::move(options)), listen_fd_(listen_fd), port_(port), wake_fd_(wake_fd) {
  thread_ = std::thread([this] { Serve(); });
}

HttpEndpoints::~HttpEndpoints() { Stop(); }

void HttpEndpoints::Stop() {
  if (stopping_.exchange(true)) return;  // already stopped (or stopping on another thread)
  uint64_t one = 1;
  [[maybe_unused]] auto n = write(wake_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
  close(wake_fd_);
  spdlog::info("component=http_endpoints op=stop port={}", port_);
}

HttpEndpoints::Response HttpEndpoints::Handle(const std::string& method, const std::string& path) {
  const std::string kText = "text/plain; charset=utf-8";
  if (method != "GET" && method != "HEAD") return {405, kText, "method not allowed\n"};
  auto check = [&](const std::function<Status()>& probe) -> Response {
    Status s = probe ? probe() : OkStatus();
    if (s.ok()) return {200, kText, "ok"};
    return {503, kText, s.message()};
  };
  if (path == "/healthz" || path == "/livez") return check(options_.liveness);
  if (path == "/readyz") return check(options_.readiness);
  if (path == "/metrics" && options_.registry) {
    prometheus::TextSerializer serializer;
    return {200, "text/plain; version=0.0.4; charset=utf-8",
            serializer.Serialize(options_.registry->Collect())};
  }
  return {404, kText, "404 page not found\n"};
}

void HttpEndpoints::Serve() {
  // std::list: poll results index connections; erasing one keeps the others' addresses.
  std::list<Connection> conns;
  std::vector<pollfd> fds;
  std::vector<std::list<Connection>::iterator> owners;
  const RenderFor answer = [this](const std::string& method, const std::string& path) {
    const Response resp = Handle(method, path);
    return Render(resp.code, resp.content_type, resp.body, method == "HEAD");
  };
  while (!stopping_.load()) {
    auto now = std::chrono::steady_clock::now();
    DropExpired(conns, now);
    const int timeout_ms = BuildPollSet(wake_fd_, listen_fd_, conns, now, fds, owners);
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
    if (fds[1].revents & POLLIN) AcceptAll(listen_fd_, now + options_.connection_deadline, conns);
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      auto it = owners[i - 2];
      if (!Advance(*it, answer)) {
        close(it->fd);
        conns.erase(it);
      }
    }
  }
  for (auto& c : conns) close(c.fd);
}

}  // namespace stasis
