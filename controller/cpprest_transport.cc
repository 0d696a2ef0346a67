// The cpprestsdk implementation of Transport: the only file that includes cpprest headers.
// cpprest exceptions stop here and become Status values.

// cpprest's U() macro collides with GoogleTest and others; keep it out of the project.
#define _TURN_OFF_PLATFORM_STRING
#include <cpprest/http_client.h>
#include <cpprest/streams.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/ssl.hpp>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "controller/transport.h"

namespace stasis {
namespace {

namespace http = web::http;
using web::http::client::http_client;
using web::http::client::http_client_config;
using Body = concurrency::streams::streambuf<uint8_t>;

// A watch is long-lived and each event must reach on_line as soon as its bytes have arrived.
// The response body is a producer_consumer_buffer that the asio client fills chunk by chunk and
// never syncs, so getn(n) completes only once n bytes are buffered (or the body ends), and
// read_line costs a pplx task per line. So: take what is buffered, at most kReadChunk, and
// while nothing is, wait for one byte with getc() (which leaves it in the buffer). A getn() of
// no more than in_avail() completes inline: one task hop per wait for data, not per line.
constexpr size_t kReadChunk = 64 * 1024;

// Appends what has arrived (at least one byte) to `to`; false at the end of the body. Throws
// what the connection failed with.
bool ReadAvailable(Body& body, std::string& to) {
  size_t n = body.in_avail();
  if (n == 0) {
    if (body.getc().get() == Body::traits::eof()) return false;
    n = body.in_avail();
  }
  n = std::min(n, kReadChunk);
  const size_t old = to.size();
  to.resize(old + n);
  to.resize(old + body.getn(reinterpret_cast<uint8_t*>(to.data() + old), n).get());
  return true;
}

// cpprest blocks inside a read with no way to interrupt it but the request's cancellation token
// (which closes the connection). One thread for the whole process turns every open stream's
// cancel flag into its token: a polling thread per stream cost each watch 20 wake-ups a second,
// which in one process holding many node agents (the fleet benchmark) was most of its idle CPU.
class CancelWatchdog {
 public:
  static CancelWatchdog& Get() {
    static auto* watchdog = new CancelWatchdog();  // never destroyed: streams may end at exit
    return *watchdog;
  }

  // Watches `flag` until Remove(id); cancels `cts` once the flag is set.
  uint64_t Add(const std::atomic<bool>* flag, pplx::cancellation_token_source cts) {
    std::lock_guard lock(mu_);
    const uint64_t id = ++next_id_;
    watched_.emplace(id, Watched{flag, std::move(cts)});
    cv_.notify_one();
    return id;
  }

  void Remove(uint64_t id) {
    std::lock_guard lock(mu_);
    watched_.erase(id);
  }

 private:
  struct Watched {
    const std::atomic<bool>* flag;
    pplx::cancellation_token_source cts;
  };
  static constexpr std::chrono::milliseconds kPoll{50};

  CancelWatchdog() { std::thread([this] { Run(); }).detach(); }

  [[noreturn]] void Run() {
    std::unique_lock lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return !watched_.empty(); });
      std::vector<pplx::cancellation_token_source> cancelled;
      for (auto it = watched_.begin(); it != watched_.end();) {
        if (!it->second.flag->load()) {
          ++it;
          continue;
        }
        cancelled.push_back(it->second.cts);
        it = watched_.erase(it);
      }
      lock.unlock();
      for (auto& cts : cancelled) cts.cancel();  // closes connections: not under the lock
      lock.lock();
      cv_.wait_for(lock, kPoll);
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Watched> watched_;
  uint64_t next_id_ = 0;
};

// A stream's cancel flag watched for as long as the stream is open.
class CancelOnFlag {
 public:
  CancelOnFlag(const std::atomic<bool>* flag, const pplx::cancellation_token_source& cts)
      : id_(flag ? CancelWatchdog::Get().Add(flag, cts) : 0) {}
  ~CancelOnFlag() {
    if (id_ != 0) CancelWatchdog::Get().Remove(id_);
  }
  CancelOnFlag(const CancelOnFlag&) = delete;
  CancelOnFlag& operator=(const CancelOnFlag&) = delete;

 private:
  uint64_t id_;
};

// The Retry-After header, "" when absent.
std::string RetryAfter(const http::http_response& response) {
  auto it = response.headers().find("Retry-After");
  return it == response.headers().end() ? "" : it->second;
}

// The status and headers of a response, its body not yet read.
HttpResponse Head(const http::http_response& response) {
  HttpResponse out;
  out.status = response.status_code();
  out.retry_after = RetryAfter(response);
  return out;
}

Status TooLarge(const HttpRequest& request, const std::string& what, size_t limit) {
  return Status(Code::kResourceExhausted, request.method + " " + request.path + ": " + what +
                                              " is larger than the client accepts (" +
                                              std::to_string(limit) + " bytes)");
}

// The whole body, or kResourceExhausted as soon as it passes `limit` (the caller then cancels
// the request, which closes the connection rather than draining it).
Result<std::string> ReadBody(http::http_response& response, size_t limit, const HttpRequest& request) {
  if (response.headers().content_length() > limit) return TooLarge(request, "the response", limit);
  Body body = response.body().streambuf();
  std::string out;
  while (ReadAvailable(body, out)) {
    if (out.size() > limit) return TooLarge(request, "the response", limit);
  }
  return out;
}

// Cancels a request whose response is still arriving and waits (5 s at most) until cpprest has
// let go of it. The cancellation closes the connection and ends cpprest's read chain soon after;
// a response destroyed before that leaves an asio read on a closed socket, which crashed in
// epoll_reactor::start_op (seen under ASan in ClientLimitsTest.AHundredMebibyteResponseIsRefused).
void Abandon(pplx::cancellation_token_source& cts, const http::http_response& response) noexcept {
  try {
    cts.cancel();
    auto received = response.content_ready();
    // The chain ends with the cancellation's error: observed here, never left to pplx.
    received.then([](pplx::task<http::http_response> t) {
      try {
        t.wait();
      } catch (...) {
      }
    });
    for (int i = 0; i < 5000 && !received.is_done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  } catch (...) {
  }
}

// Abandons the response on every way out before its body has ended (a bound passed, the
// caller's cancellation, an exception), as the last thing before the response goes.
class LetGoUnlessEnded {
 public:
  LetGoUnlessEnded(pplx::cancellation_token_source& cts, const http::http_response& response)
      : cts_(cts), response_(response) {}
  ~LetGoUnlessEnded() {
    if (!ended_) Abandon(cts_, response_);
  }
  void Ended() { ended_ = true; }

 private:
  pplx::cancellation_token_source& cts_;
  const http::http_response& response_;
  bool ended_ = false;
};

// Resends of a request whose pooled connection turned out dead (Do).
constexpr int kMaxResends = 4;

class CpprestTransport : public Transport {
 public:
  explicit CpprestTransport(RestConfig config) : config_(std::move(config)) {
    web::uri uri(config_.server);
    host_ = uri.host() + ":" + std::to_string(uri.port());
  }

  std::string Host() const override { return host_; }

  Result<HttpResponse> Do(const HttpRequest& request) override {
    auto result = DoOnce(request);
    // A pooled keep-alive connection the server has since closed (an API server restarted, an
    // idle timeout) fails while the request is being written: the server cannot have acted on a
    // request it never received whole, so it is sent again, as Go's net/http does for a reused
    // connection that fails before any answer. The pool may hold several such connections (one
    // per request that was in flight together), each discarded as it fails: a few resends, not one.
    for (int resend = 1; resend <= kMaxResends && !result.ok() &&
                         result.status().message().find(kWriteFailed) != std::string::npos;
         ++resend) {
      spdlog::info("request failed on a reused connection method={} path={} action=resend attempt={}",
                   request.method, request.path, resend);
      result = DoOnce(request);
    }
    return result;
  }

  Result<HttpResponse> DoOnce(const HttpRequest& request) {
    pplx::cancellation_token_source cts;
    try {
      auto sent = Send(request, cts);
      if (!sent.ok()) return sent.status();
      auto& response = *sent;
      LetGoUnlessEnded guard(cts, response);
      HttpResponse out = Head(response);
      auto body = ReadBody(response, config_.max_response_bytes, request);
      if (!body.ok()) return body.status();
      guard.Ended();
      out.body = std::move(*body);
      return out;
    } catch (const http::http_exception& e) {
      return Classify(request, e.what(), e.error_code().value());
    } catch (const std::exception& e) {
      return Classify(request, e.what(), 0);
    }
  }

  Result<HttpResponse> Stream(const HttpRequest& request,
                              const std::function<bool(std::string_view)>& on_line,
                              const std::atomic<bool>* cancel) override {
    pplx::cancellation_token_source cts;
    CancelOnFlag watched(cancel, cts);
    auto cancelled = [&] { return cancel && cancel->load(); };
    try {
      auto sent = Send(request, cts);
      if (!sent.ok()) return sent.status();
      auto& response = *sent;
      LetGoUnlessEnded guard(cts, response);
      HttpResponse out = Head(response);
      if (out.status != http::status_codes::OK) {
        auto body = ReadBody(response, config_.max_response_bytes, request);
        if (!body.ok()) return body.status();
        guard.Ended();
        out.body = std::move(*body);
        return out;
      }
      Body body = response.body().streambuf();
      // False when the stream should stop.
      auto deliver = [&](std::string_view line) {
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        return line.empty() || on_line(line);
      };
      std::string pending;  // received bytes not yet delivered: a line still incomplete
      while (!cancelled()) {
        const size_t kept = pending.size();  // holds no newline
        if (!ReadAvailable(body, pending)) {
          guard.Ended();
          if (!pending.empty()) deliver(pending);  // a last line without a newline
          break;
        }
        size_t start = 0;
        for (size_t nl = pending.find('\n', kept); nl != std::string::npos;
             nl = pending.find('\n', start)) {
          if (nl - start > config_.max_line_bytes) {
            return TooLarge(request, "a line of the stream", config_.max_line_bytes);
          }
          if (cancelled() || !deliver(std::string_view(pending).substr(start, nl - start))) {
            return out;
          }
          start = nl + 1;
        }
        pending.erase(0, start);
        if (pending.size() > config_.max_line_bytes) {
          return TooLarge(request, "a line of the stream", config_.max_line_bytes);
        }
      }
      return out;
    } catch (const pplx::task_canceled&) {
      HttpResponse out;
      out.status = http::status_codes::OK;
      return out;  // cancelled by the caller: a clean end
    } catch (const http::http_exception& e) {
      if (cancelled()) return HttpResponse{200, "", ""};
      return Classify(request, e.what(), e.error_code().value());
    } catch (const std::exception& e) {
      if (cancelled()) return HttpResponse{200, "", ""};
      return Classify(request, e.what(), 0);
    }
  }

 private:
  // Sends the request and waits for the response's headers; throws what cpprest throws. After
  // a 401 the credentials that were sent are stale: an exec plugin's cached token is dropped so
  // that the next request runs the plugin again (client-go's exec round tripper).
  Result<http::http_response> Send(const HttpRequest& request, pplx::cancellation_token_source& cts) {
    std::string token;
    auto built = Build(request, token);
    if (!built.ok()) return built.status();
    auto response = ClientFor(request.timeout).request(*built, cts.get_token()).get();
    if (response.status_code() == http::status_codes::Unauthorized && config_.on_unauthorized) {
      config_.on_unauthorized(token);
    }
    return response;
  }

  // The request with its headers; `token` is set to the bearer token it carries. Fails when
  // the token cannot be had (an exec credential plugin that failed).
  Result<http::http_request> Build(const HttpRequest& request, std::string& token) {
    http::http_request req(http::method(request.method));
    req.set_request_uri(web::uri(request.path));
    req.headers().add("Accept", "application/json");
    req.headers().add("User-Agent", config_.user_agent);
    if (!config_.impersonate_user.empty()) {
      req.headers().add("Impersonate-User", config_.impersonate_user);
      if (!config_.impersonate_group.empty()) {
        req.headers().add("Impersonate-Group", config_.impersonate_group);
      }
      for (const auto& [key, value] : config_.impersonate_extra) {
        // The key is part of the header name: percent-encoded, as client-go does.
        req.headers().add("Impersonate-Extra-" + web::uri::encode_data_string(key), value);
      }
    }
    if (config_.bearer_token) {
      auto bearer = config_.bearer_token();
      if (!bearer.ok()) return Status(bearer.status().code(), request.method + " " + config_.server +
                                                                  request.path + ": " + bearer.status().message());
      token = *bearer;
      if (!token.empty()) req.headers().add("Authorization", "Bearer " + token);
    }
    if (!request.body.empty() || request.method == "POST" || request.method == "PUT" ||
        request.method == "PATCH") {
      req.set_body(request.body, request.content_type);
    }
    return req;
  }

  // One client per timeout: cpprest fixes the timeout per client, and clients are cheap to
  // keep (they pool connections).
  http_client& ClientFor(std::chrono::milliseconds timeout) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = clients_.find(timeout.count());
    if (it != clients_.end()) return *it->second;
    http_client_config cfg;
    cfg.set_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
    cfg.set_validate_certificates(true);
    const RestConfig config = config_;
    cfg.set_ssl_context_callback([config](boost::asio::ssl::context& ctx) {
      // cpprest has already loaded the system's CA store into this context. A cluster client
      // trusts only the cluster's CA, as client-go does: a fresh, empty store replaces it.
      SSL_CTX_set_cert_store(ctx.native_handle(), X509_STORE_new());
      ctx.add_certificate_authority(boost::asio::buffer(config.ca_pem));
      if (!config.client_cert_pem.empty()) {
        ctx.use_certificate_chain(boost::asio::buffer(config.client_cert_pem));
        ctx.use_private_key(boost::asio::buffer(config.client_key_pem),
                            boost::asio::ssl::context::pem);
      }
    });
    auto client = std::make_unique<http_client>(web::uri(config_.server), cfg);
    auto& ref = *client;
    clients_.emplace(timeout.count(), std::move(client));
    return ref;
  }

  Status Classify(const HttpRequest& request, const std::string& what, int error_code) {
    const std::string msg = request.method + " " + config_.server + request.path + ": " + what;
    // cpprest reports its own timeouts as ETIMEDOUT (errc::timed_out).
    if (error_code == static_cast<int>(std::errc::timed_out) ||
        what.find("timed out") != std::string::npos) {
      return Status(Code::kDeadlineExceeded, msg);
    }
    return Status(Code::kUnavailable, msg);
  }

  // cpprest's message for a request that could not be sent ("Failed to write request body",
  // "… headers").
  static constexpr char kWriteFailed[] = "Failed to write request";

  RestConfig config_;
  std::string host_;
  std::mutex mu_;
  std::map<long, std::unique_ptr<http_client>> clients_;
};

}  // namespace

std::unique_ptr<Transport> NewCpprestTransport(const RestConfig& config) {
  return std::make_unique<CpprestTransport>(config);
}

}  // namespace stasis
