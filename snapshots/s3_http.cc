#include "snapshots/s3_http.h"

#include <curl/curl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <utility>

namespace stasis {
namespace {

// libcurl adds this to every S3 request's signature and headers: the body is not hashed up
// front, so a body read from a file is read once, as it is sent (TLS protects it in transit;
// the snapshot's own checksums protect it end to end).
constexpr char kUnsignedPayload[] = "x-amz-content-sha256: UNSIGNED-PAYLOAD";
// No "Expect:" header to turn off 100-continue: libcurl 7.88 signs even a removed header
// (SignedHeaders=expect;…) and the store then refuses the signature. Its 100-continue costs a
// round trip per upload and spares sending a body the store would refuse.
constexpr char kSessionTokenHeader[] = "x-amz-security-token: ";
constexpr size_t kMaxIdleHandles = 16;

void GlobalInitOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

bool Is2xx(long status) { return status >= 200 && status < 300; }

// The state one exchange's callbacks share.
struct Exchange {
  CURL* handle;
  const S3HttpRequest& request;
  S3HttpResponse& response;
  uint64_t read_pos = 0;  // of the request body
  long status = 0;        // the response's, once its headers are in
};

size_t ReadBody(char* buffer, size_t size, size_t nitems, void* user) {
  auto* x = static_cast<Exchange*>(user);
  const S3HttpRequest& r = x->request;
  uint64_t total = r.body_fd >= 0 ? r.body_length : r.body.size();
  size_t n = static_cast<size_t>(std::min<uint64_t>(size * nitems, total - x->read_pos));
  if (n == 0) return 0;
  if (r.body_fd < 0) {
    std::memcpy(buffer, r.body.data() + x->read_pos, n);
  } else {
    ssize_t got = pread(r.body_fd, buffer, n, static_cast<off_t>(r.body_offset + x->read_pos));
    if (got <= 0) {  // a file shorter than promised, or EIO
      x->response.local_failed = true;
      x->response.outcome.transport_message =
          got == 0 ? "reading the body: the file ends before the length given"
                   : std::string("reading the body: ") + std::strerror(errno);
      return CURL_READFUNC_ABORT;
    }
    n = static_cast<size_t>(got);
  }
  x->read_pos += n;
  return n;
}

// libcurl rewinds the body when it resends a request on a reused connection that had died.
int SeekBody(void* user, curl_off_t offset, int origin) {
  auto* x = static_cast<Exchange*>(user);
  if (origin != SEEK_SET || offset < 0) return CURL_SEEKFUNC_CANTSEEK;
  x->read_pos = static_cast<uint64_t>(offset);
  return CURL_SEEKFUNC_OK;
}

bool WriteToSink(Exchange* x, const char* data, size_t n) {
  const S3HttpRequest& r = x->request;
  while (n > 0) {
    off_t at = static_cast<off_t>(r.sink_offset + x->response.sink_bytes);
    ssize_t put = pwrite(r.sink_fd, data, n, at);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) {
      x->response.local_failed = true;
      x->response.outcome.transport_message =
          std::string("writing the body: ") + std::strerror(errno);
      return false;
    }
    x->response.sink_bytes += static_cast<uint64_t>(put);
    data += put;
    n -= static_cast<size_t>(put);
  }
  return true;
}

size_t WriteBody(char* data, size_t size, size_t nmemb, void* user) {
  auto* x = static_cast<Exchange*>(user);
  size_t n = size * nmemb;
  if (x->status == 0) curl_easy_getinfo(x->handle, CURLINFO_RESPONSE_CODE, &x->status);
  if (Is2xx(x->status) && x->request.sink_fd >= 0) {
    if (x->request.sink_status != 0 && x->status != x->request.sink_status) {
      x->response.sink_refused = true;
      return 0;
    }
    return WriteToSink(x, data, n) ? n : 0;  // 0 makes libcurl stop with CURLE_WRITE_ERROR
  }
  x->response.body.append(data, n);
  return n;
}

bool HeaderIs(std::string_view line, std::string_view name) {
  if (line.size() <= name.size() || line[name.size()] != ':') return false;
  return std::equal(name.begin(), name.end(), line.begin(),
                    [](char a, char b) { return std::tolower(a) == std::tolower(b); });
}

std::string HeaderValue(std::string_view line, size_t name_size) {
  std::string_view v = line.substr(name_size + 1);
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' ')) {
    v.remove_suffix(1);
  }
  return std::string(v);
}

size_t OnHeader(char* data, size_t size, size_t nitems, void* user) {
  auto* x = static_cast<Exchange*>(user);
  std::string_view line(data, size * nitems);
  if (line.substr(0, 5) == "HTTP/") {  // a new response (after a 100 Continue): start over
    x->response.etag.clear();
    x->response.content_length = 0;
    x->status = 0;
  } else if (HeaderIs(line, "etag")) {
    x->response.etag = HeaderValue(line, 4);
  } else if (HeaderIs(line, "content-length")) {
    x->response.content_length = std::strtoull(HeaderValue(line, 14).c_str(), nullptr, 10);
  }
  return size * nitems;
}

}  // namespace

struct S3Http::Pool {
  std::mutex mu;
  std::vector<CURL*> idle;

  ~Pool() {
    for (CURL* h : idle) curl_easy_cleanup(h);
  }
  CURL* Take() {
    std::lock_guard<std::mutex> lock(mu);
    if (idle.empty()) return curl_easy_init();
    CURL* h = idle.back();
    idle.pop_back();
    curl_easy_reset(h);  // options go, the connection stays
    return h;
  }
  void Give(CURL* h) {
    std::lock_guard<std::mutex> lock(mu);
    if (idle.size() < kMaxIdleHandles) idle.push_back(h);
    else curl_easy_cleanup(h);
  }
};

S3Http::S3Http(S3Endpoint endpoint, S3Deadlines deadlines)
    : endpoint_(std::move(endpoint)),
      deadlines_(deadlines),
      sigv4_("aws:amz:" + endpoint_.region + ":s3"),
      pool_(std::make_unique<Pool>()) {
  GlobalInitOnce();
}

S3Http::~S3Http() = default;

namespace {

void SetMethodAndBody(CURL* h, const S3HttpRequest& r, Exchange* x) {
  curl_off_t length = static_cast<curl_off_t>(r.body_fd >= 0 ? r.body_length : r.body.size());
  if (r.method == "HEAD") {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else if (r.method == "PUT") {
    curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, length);
  } else if (r.method == "POST") {
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, length);
  } else if (r.method != "GET") {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, r.method.c_str());
  }
  curl_easy_setopt(h, CURLOPT_READFUNCTION, ReadBody);
  curl_easy_setopt(h, CURLOPT_READDATA, x);
  curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, SeekBody);
  curl_easy_setopt(h, CURLOPT_SEEKDATA, x);
}

}  // namespace

S3HttpResponse S3Http::Perform(const S3HttpRequest& request) {
  S3HttpResponse response;
  CURL* h = pool_->Take();
  if (h == nullptr) {
    response.outcome = {true, "libcurl could not make a handle", 0, "", ""};
    return response;
  }
  Exchange x{h, request, response};
  char error[CURL_ERROR_SIZE] = "";
  curl_slist* headers = nullptr;
  for (const std::string& line : request.headers) {
    headers = curl_slist_append(headers, line.c_str());
  }
  headers = curl_slist_append(headers, kUnsignedPayload);
  if (!endpoint_.credentials.session_token.empty()) {
    headers = curl_slist_append(
        headers, (kSessionTokenHeader + endpoint_.credentials.session_token).c_str());
  }
  curl_easy_setopt(h, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(deadlines_.connect.count()));
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, deadlines_.low_speed_bytes);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, static_cast<long>(deadlines_.low_speed_time.count()));
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(deadlines_.total.count()));
  curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4_.c_str());
  curl_easy_setopt(h, CURLOPT_USERNAME, endpoint_.credentials.access_key_id.c_str());
  curl_easy_setopt(h, CURLOPT_PASSWORD, endpoint_.credentials.secret_access_key.c_str());
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, WriteBody);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &x);
  SetMethodAndBody(h, request, &x);
  CURLcode rc = curl_easy_perform(h);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &response.outcome.http_status);
  if (rc != CURLE_OK && !response.local_failed && !response.sink_refused) {
    response.outcome.transport_error = true;
    response.outcome.transport_message = error[0] != '\0' ? error : curl_easy_strerror(rc);
  }
  curl_slist_free_all(headers);
  // The handle's options point at this call's locals; reset before anyone else may use it.
  curl_easy_reset(h);
  pool_->Give(h);
  return response;
}

}  // namespace stasis
