// A client of QEMU's machine protocol (QMP) over its unix socket: one JSON object per line each
// way; the server greets, the client negotiates capabilities, then every command is answered by
// exactly one {"return": …} or {"error": …} line, with asynchronous {"event": …} lines
// interleaved anywhere (kept, never mistaken for an answer).
//
// Invariants: every read has a deadline (a QEMU that stops answering costs a kDeadlineExceeded,
// never a hung agent); one command is in flight at a time; a closed connection is kUnavailable
// with reason "qmp_closed" (QEMU exited or was killed). Failures carry the reasons of
// runtime_driver.h where they map ("timeout"), else "qmp_closed" / "qmp_error" / "runtime_error".
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace stasis {

// Splits a byte stream into lines (the QMP framing). Exposed for unit tests.
class QmpLineBuffer {
 public:
  void Append(const char* data, size_t n) { buf_.append(data, n); }
  // The next complete line without its "\n" (and a trailing "\r"), if one has arrived.
  std::optional<std::string> Next();
  size_t pending() const { return buf_.size(); }

 private:
  std::string buf_;
};

// One line from the server, classified.
struct QmpMessage {
  enum class Kind { kGreeting, kReturn, kError, kEvent };
  Kind kind;
  nlohmann::json body;  // "return"'s value, "error"'s object, the event object, the greeting
};
// kInternal "qmp_error" for a line that is not one of the four shapes. Exposed for unit tests.
Result<QmpMessage> ParseQmpLine(const std::string& line);

// The error object of a failed command, "GenericError: Migration is disabled …".
std::string QmpErrorText(const nlohmann::json& error);

class QmpClient {
 public:
  ~QmpClient();
  QmpClient(const QmpClient&) = delete;
  QmpClient& operator=(const QmpClient&) = delete;

  // Connects, reads the greeting and negotiates capabilities before `deadline` (total). A path
  // longer than a sockaddr_un holds is reached through its directory's /proc/self/fd entry.
  static Result<std::unique_ptr<QmpClient>> Connect(const std::string& socket_path,
                                                    std::chrono::milliseconds deadline);
  // Wraps a connected stream socket (taken over); reads the greeting and negotiates. For tests.
  static Result<std::unique_ptr<QmpClient>> FromFd(int fd, std::chrono::milliseconds deadline);

  // Runs one command; returns its "return" value, or kFailedPrecondition "qmp_error" quoting
  // QEMU's error. `pass_fd` >= 0 is sent alongside the command (SCM_RIGHTS), as `getfd` needs.
  Result<nlohmann::json> Execute(const std::string& command,
                                 const nlohmann::json& arguments = nullptr,
                                 std::chrono::milliseconds deadline = std::chrono::seconds(30),
                                 int pass_fd = -1);

  // Events received so far (SHUTDOWN, STOP, RESUME, MIGRATION…), oldest first.
  const std::vector<nlohmann::json>& events() const { return events_; }

 private:
  explicit QmpClient(int fd) : fd_(fd) {}
  Status Handshake(std::chrono::milliseconds deadline);
  Status Send(const std::string& line, int pass_fd);
  // The next non-event message, before `until`.
  Result<QmpMessage> ReadMessage(std::chrono::steady_clock::time_point until);

  int fd_;
  QmpLineBuffer lines_;
  std::vector<nlohmann::json> events_;
};

}  // namespace stasis
