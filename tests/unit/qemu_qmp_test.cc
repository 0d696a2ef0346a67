// The QMP client's framing against a scripted server on a socketpair: lines split across reads,
// events interleaved with answers, errors, a descriptor passed with a command, a server that
// goes silent (deadline) or hangs up (closed). The real QEMU is in
// tests/e2e/qemu_microvm_driver_test.cc.
#include "runtimes/qemu_qmp.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

namespace stasis {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

const std::string kGreeting = R"({"QMP": {"version": {"qemu": {"major": 7}}, "capabilities": []}})"
                              "\n";

// The server side of a socketpair, writing scripted bytes and reading the client's lines.
class FakeServer {
 public:
  FakeServer() {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    client_fd_ = fds[0];
    server_fd_ = fds[1];
  }
  ~FakeServer() {
    if (server_fd_ >= 0) close(server_fd_);
  }
  int TakeClientFd() { return client_fd_; }
  void Write(const std::string& s) {
    ASSERT_EQ(write(server_fd_, s.data(), s.size()), static_cast<ssize_t>(s.size()));
  }
  // One line from the client, and the descriptor that came with it (or -1).
  std::string ReadLine(int* fd_out = nullptr) {
    std::string line;
    char c;
    for (;;) {
      iovec iov{&c, 1};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      if (recvmsg(server_fd_, &msg, 0) != 1) return line;
      if (cmsghdr* h = CMSG_FIRSTHDR(&msg); h && h->cmsg_type == SCM_RIGHTS && fd_out) {
        std::memcpy(fd_out, CMSG_DATA(h), sizeof(int));
      }
      if (c == '\n') return line;
      line += c;
    }
  }
  void HangUp() {
    close(server_fd_);
    server_fd_ = -1;
  }

 private:
  int client_fd_ = -1;
  int server_fd_ = -1;
};

TEST(QmpLineBufferTest, SplitsLinesAcrossChunksAndKeepsTheRest) {
  QmpLineBuffer b;
  b.Append("{\"a\":", 5);
  EXPECT_FALSE(b.Next().has_value());
  b.Append("1}\r\n{\"b\"", 8);
  EXPECT_EQ(b.Next().value(), "{\"a\":1}");
  EXPECT_FALSE(b.Next().has_value());
  EXPECT_EQ(b.pending(), 4u);
  b.Append(":2}\n\n", 5);
  EXPECT_EQ(b.Next().value(), "{\"b\":2}");
  EXPECT_EQ(b.Next().value(), "");
}

TEST(ParseQmpLineTest, ClassifiesTheFourShapesAndRefusesOthers) {
  EXPECT_EQ(ParseQmpLine(R"({"return": {}})")->kind, QmpMessage::Kind::kReturn);
  auto err = ParseQmpLine(R"({"error": {"class": "GenericError", "desc": "no"}})");
  ASSERT_TRUE(err.ok());
  EXPECT_EQ(err->kind, QmpMessage::Kind::kError);
  EXPECT_EQ(QmpErrorText(err->body), "GenericError: no");
  EXPECT_EQ(ParseQmpLine(R"({"event": "STOP", "timestamp": {}})")->kind, QmpMessage::Kind::kEvent);
  EXPECT_EQ(ParseQmpLine(kGreeting.substr(0, kGreeting.size() - 1))->kind,
            QmpMessage::Kind::kGreeting);
  for (const char* bad : {"not json", "[1,2]", R"({"something": 1})", R"({"error": "text"})"}) {
    auto r = ParseQmpLine(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().reason(), "qmp_error") << bad;
  }
}

TEST(QmpClientTest, NegotiatesThenSkipsEventsToTheAnswer) {
  FakeServer server;
  std::thread t([&] {
    server.Write(kGreeting);
    EXPECT_EQ(server.ReadLine(), R"({"execute":"qmp_capabilities"})");
    server.Write(R"({"return": {}})"
                 "\n");
    EXPECT_EQ(server.ReadLine(), R"({"arguments":{"uri":"fd:x"},"execute":"migrate"})");
    // An event, then the answer split over two writes.
    server.Write(R"({"event": "STOP", "timestamp": {"seconds": 1}})"
                 "\n"
                 R"({"return": {"sta)");
    std::this_thread::sleep_for(20ms);
    server.Write(R"(tus": "active"}})"
                 "\n");
  });
  auto c = QmpClient::FromFd(server.TakeClientFd(), 5s);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto r = (*c)->Execute("migrate", {{"uri", "fd:x"}}, 5s);
  t.join();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["status"], "active");
  ASSERT_EQ((*c)->events().size(), 1u);
  EXPECT_EQ((*c)->events()[0]["event"], "STOP");
}

TEST(QmpClientTest, AnErrorAnswerIsAFailedPreconditionQuotingQemu) {
  FakeServer server;
  std::thread t([&] {
    server.Write(kGreeting);
    server.ReadLine();
    server.Write(R"({"return": {}})"
                 "\n");
    server.ReadLine();
    server.Write(
        R"({"error": {"class": "GenericError", "desc": "There's a migration process in progress"}})"
        "\n");
  });
  auto c = QmpClient::FromFd(server.TakeClientFd(), 5s);
  ASSERT_TRUE(c.ok());
  auto r = (*c)->Execute("migrate", {{"uri", "fd:x"}}, 5s);
  t.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(r.status().reason(), "qmp_error");
  EXPECT_THAT(r.status().message(),
              HasSubstr("migrate: GenericError: There's a migration process in progress"));
}

TEST(QmpClientTest, PassesADescriptorWithTheCommand) {
  FakeServer server;
  int received = -1;
  char path[] = "/tmp/stasis-qmp-test-XXXXXX";
  const int file = mkstemp(path);
  ASSERT_GE(file, 0);
  unlink(path);
  std::thread t([&] {
    server.Write(kGreeting);
    server.ReadLine();
    server.Write(R"({"return": {}})"
                 "\n");
    EXPECT_EQ(server.ReadLine(&received), R"({"arguments":{"fdname":"img"},"execute":"getfd"})");
    server.Write(R"({"return": {}})"
                 "\n");
  });
  auto c = QmpClient::FromFd(server.TakeClientFd(), 5s);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE((*c)->Execute("getfd", {{"fdname", "img"}}, 5s, file).ok());
  t.join();
  ASSERT_GE(received, 0);
  struct stat a {
  }, b{};
  ASSERT_EQ(fstat(file, &a), 0);
  ASSERT_EQ(fstat(received, &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);  // the same open file arrived
  close(received);
  close(file);
}

TEST(QmpClientTest, ASilentServerCostsTheDeadlineNotAHang) {
  FakeServer server;
  std::thread t([&] {
    server.Write(kGreeting);
    server.ReadLine();
    server.Write(R"({"return": {}})"
                 "\n");
    server.ReadLine();  // and never answers
  });
  auto c = QmpClient::FromFd(server.TakeClientFd(), 5s);
  ASSERT_TRUE(c.ok());
  auto r = (*c)->Execute("query-status", nullptr, 200ms);
  t.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kDeadlineExceeded);
  EXPECT_EQ(r.status().reason(), "timeout");
}

TEST(QmpClientTest, AHangUpIsQmpClosed) {
  FakeServer server;
  std::thread t([&] {
    server.Write(kGreeting);
    server.ReadLine();
    server.Write(R"({"return": {}})"
                 "\n");
    server.ReadLine();
    server.Write(R"({"return": {"sta)");  // half an answer, then QEMU dies
    server.HangUp();
  });
  auto c = QmpClient::FromFd(server.TakeClientFd(), 5s);
  ASSERT_TRUE(c.ok());
  auto r = (*c)->Execute("query-migrate", nullptr, 5s);
  t.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_EQ(r.status().reason(), "qmp_closed");
}

TEST(QmpClientTest, NoGreetingIsAnError) {
  FakeServer server;
  std::thread t([&] {
    server.Write(R"({"return": {}})"
                 "\n");
  });
  auto c = QmpClient::FromFd(server.TakeClientFd(), 5s);
  t.join();
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("no greeting"));
}

TEST(QmpClientTest, ABusyServerCostsTheDeadlineNotAHang) {
  // A listener that never accepts, its backlog already full: where QMP serving another client
  // leaves a second one.
  char dir[] = "/tmp/stasis-qmp-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/qmp.sock";
  const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(listener, 0), 0);
  std::vector<int> queued;
  bool full = false;
  while (!full && queued.size() < 64) {  // fill the backlog (its size is the kernel's business)
    const int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
      queued.push_back(c);
      continue;
    }
    full = errno == EAGAIN;
    close(c);
  }
  ASSERT_TRUE(full) << "the backlog never filled";
  const auto start = std::chrono::steady_clock::now();
  auto c = QmpClient::Connect(path, 300ms);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kDeadlineExceeded) << c.status().ToString();
  EXPECT_EQ(c.status().reason(), "timeout");
  EXPECT_THAT(c.status().message(), HasSubstr("the server is busy"));
  EXPECT_LT(took, 5s);
  for (int q : queued) close(q);
  close(listener);
  unlink(path.c_str());
  rmdir(dir);
}

TEST(QmpClientTest, ConnectToAMissingSocketFails) {
  auto c = QmpClient::Connect("/nonexistent-stasis-dir/qmp.sock", 1s);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().reason(), "qmp_closed");
}

}  // namespace
}  // namespace stasis
