// A REST client for built-in and custom Kubernetes resources over a Transport: get, list
// (paged), create, update, /status update, merge and JSON patch, delete with preconditions,
// and watch. Objects are nlohmann::json, so fields this code does not know survive a
// read-modify-write untouched.
//
// Errors carry the HTTP code and the Kubernetes Status reason, mapped once onto Code:
// Conflict → kAborted, NotFound → kNotFound, AlreadyExists → kAlreadyExists, Gone/Expired →
// kGone, Invalid → kInvalidArgument, Forbidden → kPermissionDenied, Unauthorized →
// kUnauthenticated, 429/5xx → kUnavailable. Requests are paced by a qps/burst limiter, and a
// request the server refuses for load is sent again after its Retry-After (ClientOptions).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/status.h"
#include "controller/backoff.h"
#include "controller/token_bucket.h"
#include "controller/transport.h"

namespace stasis {

using json = nlohmann::json;

// A resource type: {"", "v1", "configmaps", true} or {"stasis.dev", "v1alpha1", "actors", true}.
struct ResourceType {
  std::string group;  // "" for the core group
  std::string version;
  std::string plural;
  bool namespaced = true;
};

// The error detail the API server returned, beside the Status code.
struct ApiError {
  int http_code = 0;
  std::string reason;  // "Conflict", "NotFound", …
};

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  int64_t limit = 500;  // page size; 0 = unpaged
  std::string continue_token;
  std::string resource_version;  // "" = most recent (quorum read)
  // Drop every "managedFields" member while parsing (a cache's memory; see informer.cc).
  bool drop_managed_fields = false;
};

struct WatchOptions {
  std::string resource_version;  // required: never watch from "" (see informer.h)
  std::string label_selector;
  std::string field_selector;
  int timeout_seconds = 300;
  bool allow_bookmarks = true;
  bool drop_managed_fields = false;  // as in ListOptions
};

enum class PatchType { kMerge, kJson, kStrategicMerge };

struct DeleteOptions {
  std::optional<std::string> precondition_uid;
  std::optional<std::string> precondition_resource_version;
  std::optional<int64_t> grace_period_seconds;
};

// How a client paces itself: client-go's QPS/Burst token bucket, and its retries of requests
// the server refused for load (429 Too Many Requests, or 5xx with Retry-After).
struct ClientOptions {
  double qps = 0;  // requests a second; 0 = unlimited
  int burst = 1;   // requests allowed at once before the rate applies
  // Retries of a request refused for load: after the server's Retry-After (at most
  // max_retry_after), or after the backoff when it names none. client-go's maxRetries is 10.
  int max_retries = 10;
  std::chrono::seconds max_retry_after{60};
  BackoffPolicy retry_backoff{std::chrono::seconds(1), std::chrono::seconds(30), 2.0, 0.5};
  Clock* clock = &RealClock::Get();  // not owned; paces the limiter and the retries
};

// The delay before sending again a request answered with `http_code` and the Retry-After
// header `retry_after` ("" when absent): the header's seconds (capped) for a 429 or a 5xx that
// names them, `backoff` for a 429 that names none; nullopt when the answer is not a refusal for
// load (or Retry-After is an HTTP date, which the API server never sends). Pure.
std::optional<std::chrono::nanoseconds> RetryDelay(int http_code, const std::string& retry_after,
                                                   std::chrono::nanoseconds backoff,
                                                   std::chrono::seconds max_retry_after);

class KubeClient {
 public:
  // `observe(method, http_code_or_error)` is called after every request (for metrics).
  using Observer = std::function<void(const std::string& method, const std::string& code)>;
  explicit KubeClient(std::unique_ptr<Transport> transport, Observer observe = nullptr,
                      ClientOptions options = {});

  Result<json> Get(const ResourceType& type, const std::string& ns, const std::string& name);
  // One page; the caller follows metadata.continue.
  Result<json> ListPage(const ResourceType& type, const std::string& ns, const ListOptions& options);
  // Every page, items concatenated; the returned list's metadata.resourceVersion is the first
  // page's (a consistent snapshot, as the API server guarantees for continue tokens).
  Result<json> List(const ResourceType& type, const std::string& ns, ListOptions options = {});
  Result<json> Create(const ResourceType& type, const std::string& ns, const json& object);
  Result<json> Update(const ResourceType& type, const json& object);
  Result<json> UpdateStatus(const ResourceType& type, const json& object);
  Result<json> Patch(const ResourceType& type, const std::string& ns, const std::string& name,
                     PatchType patch_type, const json& patch, const std::string& subresource = "");
  Status Delete(const ResourceType& type, const std::string& ns, const std::string& name,
                const DeleteOptions& options = {});

  // Streams watch events ({"type": ADDED|MODIFIED|DELETED|BOOKMARK|ERROR, "object": …}) to
  // on_event until the server closes the watch, on_event returns false or *cancel is set.
  // A 410 (as an HTTP status or an ERROR event) is returned as kGone.
  Status Watch(const ResourceType& type, const std::string& ns, const WatchOptions& options,
               const std::function<bool(const json& event)>& on_event,
               const std::atomic<bool>* cancel);

  // The error detail of the last failed call on this thread (for logs and tests).
  static ApiError LastError();

  std::string Path(const ResourceType& type, const std::string& ns, const std::string& name = "",
                   const std::string& subresource = "") const;
  Transport& transport() { return *transport_; }

 private:
  Result<json> Send(const std::string& method, const std::string& path, const std::string& body,
                    const std::string& content_type, bool drop_managed_fields = false);
  // Sends through the limiter, again while the server refuses for load (up to max_retries).
  Result<HttpResponse> SendPaced(const std::string& method, const std::string& path,
                                 const std::function<Result<HttpResponse>()>& send);
  // One watch request; `result` gets what ended the stream from the inside (an ERROR event).
  Result<HttpResponse> StreamOnce(const HttpRequest& req, const WatchOptions& o,
                                  const std::function<bool(const json&)>& on_event,
                                  const std::atomic<bool>* cancel, Status& result);
  // Waits for the limiter's token, or `at_least` (a Retry-After), whichever is later.
  void Pace(std::chrono::nanoseconds at_least = std::chrono::nanoseconds::zero());

  std::unique_ptr<Transport> transport_;
  Observer observe_;
  ClientOptions options_;
  std::mutex limiter_mu_;
  std::optional<TokenBucket> limiter_;
};

// Maps an API server response (non-2xx) onto a Status, using the Status object's reason.
Status StatusFromResponse(int http_code, const std::string& body, const std::string& what);

// Runs fn until it returns something other than kAborted (409 Conflict), re-reading state is
// fn's job; gives up after `attempts` (client-go's DefaultRetry: 5 steps, 10 ms, ×1.0, jitter 0.1).
Status RetryOnConflict(const std::function<Status()>& fn, int attempts = 5,
                       std::chrono::milliseconds delay = std::chrono::milliseconds(10));

// Escapes a query parameter value.
std::string UrlEncode(const std::string& s);

}  // namespace stasis
