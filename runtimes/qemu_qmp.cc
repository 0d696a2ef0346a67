#include "runtimes/qemu_qmp.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

namespace stasis {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kTimeout = "timeout";
constexpr const char* kClosed = "qmp_closed";
constexpr const char* kQmpError = "qmp_error";
constexpr const char* kRuntimeError = "runtime_error";
// A line longer than this is not QMP talking (query-migrate answers are a few hundred bytes).
constexpr size_t kMaxLine = 1 << 20;

Status Errno(const std::string& what) {
  return Status(Code::kUnavailable, what + ": " + std::strerror(errno), kClosed);
}

int MillisLeft(Clock::time_point until) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
  return left.count() <= 0 ? 0 : static_cast<int>(std::min<long long>(left.count(), 1 << 30));
}

}  // namespace

std::optional<std::string> QmpLineBuffer::Next() {
  const auto nl = buf_.find('\n');
  if (nl == std::string::npos) return std::nullopt;
  std::string line = buf_.substr(0, nl);
  buf_.erase(0, nl + 1);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

Result<QmpMessage> ParseQmpLine(const std::string& line) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const std::exception& e) {
    return Status(Code::kInternal, std::string("qmp: unreadable line: ") + e.what(), kQmpError);
  }
  if (!j.is_object())
    return Status(Code::kInternal, "qmp: a line that is not an object", kQmpError);
  if (j.contains("return")) return QmpMessage{QmpMessage::Kind::kReturn, j["return"]};
  if (j.contains("error") && j["error"].is_object()) {
    return QmpMessage{QmpMessage::Kind::kError, j["error"]};
  }
  if (j.contains("event") && j["event"].is_string()) return QmpMessage{QmpMessage::Kind::kEvent, j};
  if (j.contains("QMP")) return QmpMessage{QmpMessage::Kind::kGreeting, j["QMP"]};
  return Status(Code::kInternal, "qmp: unexpected message " + j.dump(), kQmpError);
}

std::string QmpErrorText(const nlohmann::json& error) {
  const std::string cls = error.value("class", "Error");
  const std::string desc = error.value("desc", "");
  return desc.empty() ? cls : cls + ": " + desc;
}

QmpClient::~QmpClient() {
  if (fd_ >= 0) close(fd_);
}

Result<std::unique_ptr<QmpClient>> QmpClient::Connect(const std::string& socket_path,
                                                      std::chrono::milliseconds deadline) {
  const auto until = Clock::now() + deadline;
  // sun_path holds 107 characters; an actor's state directory may be longer. The directory's
  // /proc/self/fd entry names the same socket in a few characters.
  int dir_fd = -1;
  std::string path = socket_path;
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    const std::filesystem::path p(socket_path);
    dir_fd = open(p.parent_path().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0) return Errno("qmp: open " + p.parent_path().string());
    path = "/proc/self/fd/" + std::to_string(dir_fd) + "/" + p.filename().string();
    if (path.size() >= sizeof(addr.sun_path)) {
      close(dir_fd);
      return Status(Code::kInvalidArgument, "qmp: socket name too long: " + socket_path,
                    kRuntimeError);
    }
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    if (dir_fd >= 0) close(dir_fd);
    return Errno("qmp: socket");
  }
  // QMP serves one client at a time and leaves the next in the listen backlog; once that is
  // full a blocking connect would wait without limit. Non-blocking, a full backlog is EAGAIN:
  // try again until the deadline.
  int rc;
  while ((rc = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr)) != 0 &&
         (errno == EAGAIN || errno == EINTR) && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const int saved = errno;
  if (dir_fd >= 0) close(dir_fd);
  if (rc != 0) {
    close(fd);
    if (saved == EAGAIN) {
      return Status(Code::kDeadlineExceeded, "qmp: connect " + socket_path + ": the server is busy",
                    kTimeout);
    }
    errno = saved;
    return Errno("qmp: connect " + socket_path);
  }
  // Reads poll with their own deadlines; the descriptor itself blocks (sendmsg of a short line).
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return FromFd(fd, std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()));
}

Result<std::unique_ptr<QmpClient>> QmpClient::FromFd(int fd, std::chrono::milliseconds deadline) {
  std::unique_ptr<QmpClient> client(new QmpClient(fd));
  if (Status s = client->Handshake(deadline); !s.ok()) return s;
  return client;
}

Status QmpClient::Handshake(std::chrono::milliseconds deadline) {
  const auto until = Clock::now() + deadline;
  auto greeting = ReadMessage(until);
  if (!greeting.ok()) return greeting.status();
  if (greeting->kind != QmpMessage::Kind::kGreeting) {
    return Status(Code::kInternal, "qmp: no greeting", kQmpError);
  }
  auto r = Execute("qmp_capabilities", nullptr,
                   std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()));
  return r.status();
}

Status QmpClient::Send(const std::string& line, int pass_fd) {
  iovec iov{const_cast<char*>(line.data()), line.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (pass_fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
  }
  size_t sent = 0;
  while (sent < line.size()) {
    const ssize_t n = sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("qmp: send");
    }
    sent += static_cast<size_t>(n);
    // The descriptor travels with the first byte only.
    iov.iov_base = const_cast<char*>(line.data()) + sent;
    iov.iov_len = line.size() - sent;
    msg.msg_control = nullptr;
    msg.msg_controllen = 0;
  }
  return OkStatus();
}

Result<QmpMessage> QmpClient::ReadMessage(Clock::time_point until) {
  for (;;) {
    while (auto line = lines_.Next()) {
      if (line->empty()) continue;
      auto m = ParseQmpLine(*line);
      if (!m.ok()) return m.status();
      if (m->kind == QmpMessage::Kind::kEvent) {
        events_.push_back(std::move(m->body));
        continue;
      }
      return m;
    }
    if (lines_.pending() > kMaxLine) {
      return Status(Code::kInternal, "qmp: line longer than 1 MiB", kQmpError);
    }
    pollfd p{fd_, POLLIN, 0};
    const int timeout = MillisLeft(until);
    if (timeout == 0)
      return Status(Code::kDeadlineExceeded, "qmp: no answer before the deadline", kTimeout);
    const int rc = poll(&p, 1, timeout);
    if (rc < 0) {
      if (errno == EINTR) continue;
      return Errno("qmp: poll");
    }
    if (rc == 0)
      return Status(Code::kDeadlineExceeded, "qmp: no answer before the deadline", kTimeout);
    char buf[8192];
    const ssize_t n = read(fd_, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return Errno("qmp: read");
    }
    if (n == 0) return Status(Code::kUnavailable, "qmp: connection closed by QEMU", kClosed);
    lines_.Append(buf, static_cast<size_t>(n));
  }
}

Result<nlohmann::json> QmpClient::Execute(const std::string& command,
                                          const nlohmann::json& arguments,
                                          std::chrono::milliseconds deadline, int pass_fd) {
  const auto until = Clock::now() + deadline;
  nlohmann::json request = {{"execute", command}};
  if (!arguments.is_null()) request["arguments"] = arguments;
  if (Status s = Send(request.dump() + "\n", pass_fd); !s.ok()) return s;
  auto m = ReadMessage(until);
  if (!m.ok()) {
    return Status(m.status().code(), command + ": " + m.status().message(), m.status().reason());
  }
  switch (m->kind) {
    case QmpMessage::Kind::kReturn:
      return m->body;
    case QmpMessage::Kind::kError:
      return Status(Code::kFailedPrecondition, command + ": " + QmpErrorText(m->body), kQmpError);
    default:
      return Status(Code::kInternal, command + ": a second greeting", kQmpError);
  }
}

}  // namespace stasis
