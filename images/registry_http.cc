#include "images/registry_http.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <mutex>
#include <sstream>

namespace stasis::images {
namespace {

constexpr size_t kMaxIdleHandles = 8;

void GlobalInitOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

bool ReadFile(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  out = s.str();
  return !in.bad();
}

struct Exchange {
  CURL* handle;
  const HttpCall& call;
  HttpReply& reply;
};

size_t OnBody(char* data, size_t size, size_t nmemb, void* user) {
  auto* x = static_cast<Exchange*>(user);
  size_t n = size * nmemb;
  if (x->reply.status == 0) curl_easy_getinfo(x->handle, CURLINFO_RESPONSE_CODE, &x->reply.status);
  if (x->call.on_body && x->reply.status >= 200 && x->reply.status < 300) {
    if (!x->call.on_body(x->reply.status, data, n)) {
      x->reply.aborted = true;
      return 0;  // CURLE_WRITE_ERROR
    }
    return n;
  }
  if (x->reply.body.size() + n > x->call.max_body) {
    x->reply.body_too_large = true;
    return 0;
  }
  x->reply.body.append(data, n);
  return n;
}

size_t OnHeader(char* data, size_t size, size_t nitems, void* user) {
  auto* x = static_cast<Exchange*>(user);
  std::string_view line(data, size * nitems);
  if (line.starts_with("HTTP/")) {  // a new response (after a 100 Continue): start over
    x->reply.headers.clear();
    x->reply.status = 0;
    return line.size();
  }
  size_t colon = line.find(':');
  if (colon == std::string_view::npos) return line.size();
  std::string name(line.substr(0, colon));
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string_view v = line.substr(colon + 1);
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' '))
    v.remove_suffix(1);
  x->reply.headers[name] = std::string(v);
  return line.size();
}

// scheme://host:port of an absolute URL, the port made explicit; "" when it does not parse.
std::string Origin(const std::string& url) {
  CURLU* u = curl_url();
  std::string origin;
  if (curl_url_set(u, CURLUPART_URL, url.c_str(), 0) == CURLUE_OK) {
    char* scheme = nullptr;
    char* host = nullptr;
    char* port = nullptr;
    if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK) {
      std::string h(host);
      for (char& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      origin = std::string(scheme) + "://" + h + ":" + port;
    }
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
  }
  curl_url_cleanup(u);
  return origin;
}

}  // namespace

std::string HttpReply::Header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? "" : it->second;
}

struct RegistryHttp::Pool {
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
    return h;
  }
  void Give(CURL* h) {
    curl_easy_reset(h);  // options go (they point at a finished call's locals), connections stay
    std::lock_guard<std::mutex> lock(mu);
    if (idle.size() < kMaxIdleHandles)
      idle.push_back(h);
    else
      curl_easy_cleanup(h);
  }
};

RegistryHttp::RegistryHttp(const RegistryClientOptions& options)
    : options_(options), pool_(std::make_unique<Pool>()) {
  GlobalInitOnce();
  if (options_.ca_file.empty()) return;
  // libcurl takes one CA bundle: the operator's CA is added to the system store, not put in
  // its place, so a registry behind a public CA still verifies when a CA file is set.
  std::string extra;
  if (!ReadFile(options_.ca_file, extra)) {
    ca_error_ = "cannot read the registry CA file " + options_.ca_file;
    return;
  }
  std::string system;
  (void)ReadFile(options_.system_ca_file, system);  // a host without the bundle trusts the CA file alone
  ca_blob_ = system + "\n" + extra;
}

RegistryHttp::~RegistryHttp() = default;

bool RegistryHttp::SameOrigin(const std::string& a, const std::string& b) {
  std::string oa = Origin(a);
  return !oa.empty() && oa == Origin(b);
}

HttpReply RegistryHttp::Perform(const HttpCall& call) {
  HttpReply reply;
  if (!ca_error_.empty()) {
    reply.transport_error = true;
    reply.error = ca_error_;
    return reply;
  }
  CURL* h = pool_->Take();
  if (h == nullptr) {
    reply.transport_error = true;
    reply.error = "libcurl could not make a handle";
    return reply;
  }
  Exchange x{h, call, reply};
  char error[CURL_ERROR_SIZE] = "";
  curl_slist* headers = nullptr;
  for (const std::string& line : call.headers) headers = curl_slist_append(headers, line.c_str());
  curl_easy_setopt(h, CURLOPT_URL, call.url.c_str());
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(options_.connect_timeout.count()));
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, static_cast<long>(options_.low_speed_bytes));
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, static_cast<long>(options_.low_speed_time.count()));
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.request_deadline.count()));
  if (!ca_blob_.empty()) {
    curl_blob blob{ca_blob_.data(), ca_blob_.size(), CURL_BLOB_NOCOPY};
    curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
  }
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &x);
  CURLcode rc = curl_easy_perform(h);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &reply.status);
  if (rc != CURLE_OK && !reply.aborted && !reply.body_too_large) {
    reply.transport_error = true;
    reply.error = error[0] != '\0' ? error : curl_easy_strerror(rc);
  }
  char* location = nullptr;
  if (curl_easy_getinfo(h, CURLINFO_REDIRECT_URL, &location) == CURLE_OK && location != nullptr) {
    reply.redirect_url = location;  // resolved against the request's URL by libcurl
  }
  curl_slist_free_all(headers);
  pool_->Give(h);
  return reply;
}

}  // namespace stasis::images
