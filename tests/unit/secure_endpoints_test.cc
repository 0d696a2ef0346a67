// The endpoint with TLS and a metrics filter, spoken to by curl (argv, deadline): the
// certificate served is the one loaded or generated; plain HTTP to the TLS port gets no
// answer; the filter sees the Authorization header and its code is what the client gets; and
// the poll loop keeps answering /healthz while a filter call is still waiting.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>

#include "base/subprocess.h"
#include "controller/http_endpoints.h"
#include "controller/metrics.h"
#include "controller/tls_server.h"

namespace stasis {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

struct CurlResult {
  int code = 0;  // 0: no HTTP answer (curl failed)
  std::string body;
  std::string error;
};

// curl ARGS… URL, the status code on the last line of stdout.
CurlResult Curl(const std::vector<std::string>& args, const std::string& url) {
  std::vector<std::string> argv = {"curl", "-sS", "-m", "10", "-w", "\n%{http_code}"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back(url);
  auto r = RunCommand(argv, 20s);
  CurlResult out;
  if (!r.ok()) {
    out.error = r.status().ToString();
    return out;
  }
  out.error = r->err;
  auto nl = r->out.rfind('\n');
  out.body = r->out.substr(0, nl);
  if (r->exit_code == 0) out.code = std::stoi(r->out.substr(nl + 1));
  return out;
}

fs::path TempDir() {
  fs::path dir = fs::temp_directory_path() /
                 ("secure-endpoints-" + std::to_string(getpid()) + "-" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::create_directories(dir);
  return dir;
}

class SecureEndpointsTest : public ::testing::Test {
 protected:
  void Start(std::shared_ptr<TlsServerContext> tls) {
    metrics_.RegisterController("actors");
    HttpEndpointsOptions o;
    o.address = "127.0.0.1:0";
    o.registry = metrics_.registry();
    o.tls = std::move(tls);
    o.metrics_filter = [this](const std::string& authorization) -> Admission {
      std::unique_lock<std::mutex> lock(mu_);
      seen_.push_back(authorization);
      ++entered_;
      cv_.notify_all();
      cv_.wait(lock, [this] { return !hold_; });
      return authorization == "Bearer good" ? Admission{200, "ok"} : Admission{403, "Forbidden\n"};
    };
    auto server = HttpEndpoints::Start(std::move(o));
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
  }
  void TearDown() override {
    Release();
    if (server_) server_->Stop();
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    hold_ = false;
    cv_.notify_all();
  }
  std::string Url(const std::string& path, const std::string& host = "127.0.0.1") {
    return "https://" + host + ":" + std::to_string(server_->port()) + path;
  }

  Metrics metrics_;
  std::unique_ptr<HttpEndpoints> server_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> seen_;
  int entered_ = 0;
  bool hold_ = false;
  fs::path dir_;
};

TEST_F(SecureEndpointsTest, ServesTheSelfSignedCertificateItGenerated) {
  auto tls = TlsServerContext::SelfSigned({"localhost", "127.0.0.1"});
  ASSERT_TRUE(tls.ok()) << tls.status().ToString();
  dir_ = TempDir();
  std::ofstream((dir_ / "ca.crt").string()) << (*tls)->certificate_pem();
  Start(*tls);
  // Verified against the generated certificate, by name and by IP address (its SANs).
  for (const std::string host : {"localhost", "127.0.0.1"}) {
    auto r = Curl({"--cacert", (dir_ / "ca.crt").string(), "-H", "Authorization: Bearer good"},
                  Url("/metrics", host));
    EXPECT_EQ(r.code, 200) << host << ": " << r.error;
    EXPECT_NE(r.body.find("controller_runtime_reconcile_total"), std::string::npos);
  }
  // Without the certificate a client cannot verify it: self-signed.
  EXPECT_EQ(Curl({}, Url("/healthz")).code, 0);
}

TEST_F(SecureEndpointsTest, LoadsTheCertificateDirectoryAndRefusesABadOne) {
  dir_ = TempDir();
  auto gen = RunCommand({"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                         "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                         "-addext", "subjectAltName=DNS:localhost", "-keyout",
                         (dir_ / "tls.key").string(), "-out", (dir_ / "tls.crt").string()},
                        30s);
  ASSERT_TRUE(gen.ok() && gen->exit_code == 0) << (gen.ok() ? gen->err : gen.status().ToString());
  auto tls = TlsServerContext::FromDir(dir_.string());
  ASSERT_TRUE(tls.ok()) << tls.status().ToString();
  Start(*tls);
  auto r = Curl({"--cacert", (dir_ / "tls.crt").string()}, Url("/healthz", "localhost"));
  EXPECT_EQ(r.code, 200) << r.error;

  EXPECT_EQ(TlsServerContext::FromDir((dir_ / "absent").string()).status().code(),
            Code::kInvalidArgument);
  fs::create_directories(dir_ / "mismatch");
  fs::copy_file(dir_ / "tls.crt", dir_ / "mismatch" / "tls.crt");
  auto other = RunCommand({"openssl", "genpkey", "-algorithm", "EC", "-pkeyopt",
                           "ec_paramgen_curve:P-256", "-out", (dir_ / "mismatch" / "tls.key").string()},
                          30s);
  ASSERT_TRUE(other.ok() && other->exit_code == 0);
  auto mismatch = TlsServerContext::FromDir((dir_ / "mismatch").string());
  EXPECT_EQ(mismatch.status().code(), Code::kInvalidArgument);
  // OpenSSL checks the pair as the key loads: "key values mismatch".
  EXPECT_NE(mismatch.status().message().find("mismatch"), std::string::npos)
      << mismatch.status().ToString();
}

TEST_F(SecureEndpointsTest, PlainHttpToTheTlsPortGetsNoAnswer) {
  auto tls = TlsServerContext::SelfSigned({"localhost"});
  ASSERT_TRUE(tls.ok());
  Start(*tls);
  auto r = Curl({}, "http://127.0.0.1:" + std::to_string(server_->port()) + "/healthz");
  EXPECT_EQ(r.code, 0) << r.body;
  // The server survives it.
  EXPECT_EQ(Curl({"-k"}, Url("/healthz")).code, 200);
}

TEST_F(SecureEndpointsTest, TheFilterDecidesWhatMetricsAnswers) {
  auto tls = TlsServerContext::SelfSigned({"localhost"});
  ASSERT_TRUE(tls.ok());
  Start(*tls);
  auto denied = Curl({"-k", "-H", "authorization:  Bearer other"}, Url("/metrics?x=1"));
  EXPECT_EQ(denied.code, 403);
  EXPECT_EQ(denied.body, "Forbidden\n");
  auto allowed = Curl({"-k", "-H", "Authorization: Bearer good"}, Url("/metrics"));
  EXPECT_EQ(allowed.code, 200);
  EXPECT_NE(allowed.body.find("# TYPE controller_runtime_reconcile_total counter"), std::string::npos);
  auto none = Curl({"-k"}, Url("/metrics"));
  EXPECT_EQ(none.code, 403);
  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_EQ(seen_, (std::vector<std::string>{"Bearer other", "Bearer good", ""}));
}

TEST_F(SecureEndpointsTest, ProbesAnswerWhileAReviewWaits) {
  auto tls = TlsServerContext::SelfSigned({"localhost"});
  ASSERT_TRUE(tls.ok());
  hold_ = true;
  Start(*tls);
  auto scrape = std::async(std::launch::async, [&] {
    return Curl({"-k", "-H", "Authorization: Bearer good"}, Url("/metrics"));
  });
  {
    std::unique_lock<std::mutex> lock(mu_);
    ASSERT_TRUE(cv_.wait_for(lock, 10s, [this] { return entered_ == 1; }));
  }
  // The review is in flight: the loop still does handshakes and answers the probes.
  for (int i = 0; i < 3; ++i) {
    auto probe = Curl({"-k"}, Url("/healthz"));
    EXPECT_EQ(probe.code, 200) << probe.error;
  }
  EXPECT_EQ(scrape.wait_for(0s), std::future_status::timeout);
  Release();
  EXPECT_EQ(scrape.get().code, 200);
}

}  // namespace
}  // namespace stasis
