// The cpprest transport's Stream() against a scripted loopback HTTP server: line splitting
// over reads of whatever has arrived, with what a kube-apiserver never sends — carriage
// returns, empty lines, a last line without a newline.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "controller/transport.h"

namespace stasis {
namespace {

using namespace std::chrono_literals;

// Serves one connection: reads the request head, then sends `pieces` as the chunks of a chunked
// 200 response, 20 ms apart so that each tends to arrive in a read of its own, then ends it —
// or, with `hold`, keeps it open and idle until the client closes it (a quiet watch).
class ScriptedServer {
 public:
  explicit ScriptedServer(std::vector<std::string> pieces, bool hold = false) : hold_(hold) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        listen(listen_fd_, 1) != 0 ||
        getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ADD_FAILURE() << "cannot listen on loopback";
      return;
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this, pieces = std::move(pieces)] { Serve(pieces); });
  }
  ~ScriptedServer() {
    if (thread_.joinable()) thread_.join();
    close(listen_fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  void Serve(const std::vector<std::string>& pieces) {
    int fd = accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) return;
    std::string head;
    char c;
    while (head.find("\r\n\r\n") == std::string::npos && read(fd, &c, 1) == 1) head += c;
    Send(fd,
         "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (const auto& piece : pieces) {
      std::this_thread::sleep_for(20ms);
      char size[32];
      std::snprintf(size, sizeof size, "%zx\r\n", piece.size());
      Send(fd, size + piece + "\r\n");
    }
    if (hold_) {
      while (read(fd, &c, 1) > 0) {
      }
    } else {
      Send(fd, "0\r\n\r\n");
    }
    close(fd);
  }
  // The client may have stopped reading and closed: no SIGPIPE.
  static void Send(int fd, const std::string& data) {
    send(fd, data.data(), data.size(), MSG_NOSIGNAL);
  }

  bool hold_ = false;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

struct Streamed {
  Result<HttpResponse> response;
  std::vector<std::string> lines;
};

// Streams from `server`; on_line stops after `stop_after` lines.
Streamed StreamFrom(const ScriptedServer& server, size_t stop_after = SIZE_MAX) {
  RestConfig config;
  config.server = server.url();
  auto transport = NewCpprestTransport(config);
  HttpRequest request;
  request.path = "/watch";
  std::vector<std::string> lines;
  auto response = transport->Stream(
      request,
      [&](std::string_view line) {
        lines.emplace_back(line);
        return lines.size() < stop_after;
      },
      nullptr);
  return {std::move(response), std::move(lines)};
}

TEST(CpprestTransportTest, SplitsLinesAcrossReads) {
  ScriptedServer server({"{\"a\":1}\r\n\n{\"b\"", ":2", "}\n\r\n", "{\"c\":3}\n{\"d\"", ":4}"});
  auto got = StreamFrom(server);
  ASSERT_TRUE(got.response.ok()) << got.response.status().ToString();
  EXPECT_EQ(got.response->status, 200);
  // CRLF and LF alike, no empty lines, a line split over reads in one piece, and the last line
  // although the body ends without a newline.
  EXPECT_EQ(got.lines,
            (std::vector<std::string>{"{\"a\":1}", "{\"b\":2}", "{\"c\":3}", "{\"d\":4}"}));
}

TEST(CpprestTransportTest, StopsWhenOnLineSaysSo) {
  ScriptedServer server({"1\n2\n3\n", "4\n"});
  auto got = StreamFrom(server, 2);
  ASSERT_TRUE(got.response.ok()) << got.response.status().ToString();
  EXPECT_EQ(got.response->status, 200);
  EXPECT_EQ(got.lines, (std::vector<std::string>{"1", "2"}));
}

// A quiet stream, read in a thread of its own until its cancel flag is set.
class QuietStream {
 public:
  QuietStream() : server_({"{\"a\":1}\n"}, /*hold=*/true) {
    RestConfig config;
    config.server = server_.url();
    transport_ = NewCpprestTransport(config);
    thread_ = std::thread([this] {
      HttpRequest request;
      request.path = "/watch";
      response_ = transport_->Stream(request, [](std::string_view) { return true; }, &cancel_);
      ended_ = true;
    });
  }
  ~QuietStream() {
    cancel_ = true;
    thread_.join();
  }
  void Cancel() { cancel_ = true; }
  bool ended() const { return ended_; }
  // Waits up to `deadline` for the stream to end.
  bool Ends(std::chrono::milliseconds deadline) const {
    for (auto waited = 0ms; waited < deadline && !ended_; waited += 10ms) std::this_thread::sleep_for(10ms);
    return ended_;
  }
  const Result<HttpResponse>& response() const { return response_; }

 private:
  ScriptedServer server_;
  std::unique_ptr<Transport> transport_;
  std::atomic<bool> cancel_{false};
  std::atomic<bool> ended_{false};
  Result<HttpResponse> response_ = Status(Code::kInternal, "not ended");
  std::thread thread_;
};

// One watchdog serves every open stream of the process: setting one stream's flag ends that
// stream, promptly and cleanly, and no other.
TEST(CpprestTransportTest, CancellingOneQuietStreamEndsOnlyIt) {
  QuietStream first, second;
  std::this_thread::sleep_for(300ms);  // both blocked in a read with nothing to come
  ASSERT_FALSE(first.ended());
  ASSERT_FALSE(second.ended());
  first.Cancel();
  ASSERT_TRUE(first.Ends(5s)) << "a cancelled quiet stream did not end";
  EXPECT_TRUE(first.response().ok()) << first.response().status().ToString();  // a clean end
  std::this_thread::sleep_for(300ms);  // several of the watchdog's rounds
  EXPECT_FALSE(second.ended()) << "cancelling one stream ended another";
  second.Cancel();
  EXPECT_TRUE(second.Ends(5s));
  EXPECT_TRUE(second.response().ok()) << second.response().status().ToString();
}

}  // namespace
}  // namespace stasis
