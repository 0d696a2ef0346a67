#include "controller/kube_client.h"

#include <algorithm>
#include <thread>

#include <spdlog/spdlog.h>

#include "controller/backoff.h"

namespace stasis {
namespace {

thread_local ApiError last_error;

Code CodeForReason(const std::string& reason, int http_code) {
  if (reason == "Conflict") return Code::kAborted;
  if (reason == "NotFound") return Code::kNotFound;
  if (reason == "AlreadyExists") return Code::kAlreadyExists;
  if (reason == "Gone" || reason == "Expired") return Code::kGone;
  if (reason == "Invalid" || reason == "BadRequest" || reason == "RequestEntityTooLarge" ||
      reason == "UnsupportedMediaType" || reason == "NotAcceptable" || reason == "MethodNotAllowed") {
    return Code::kInvalidArgument;
  }
  if (reason == "Forbidden") return Code::kPermissionDenied;
  if (reason == "Unauthorized") return Code::kUnauthenticated;
  if (reason == "Timeout" || reason == "ServerTimeout" || reason == "TooManyRequests" ||
      reason == "ServiceUnavailable" || reason == "InternalError") {
    return Code::kUnavailable;
  }
  switch (http_code) {
    case 400: case 422: return Code::kInvalidArgument;
    case 401: return Code::kUnauthenticated;
    case 403: return Code::kPermissionDenied;
    case 404: return Code::kNotFound;
    case 409: return Code::kAborted;
    case 410: return Code::kGone;
    case 429: return Code::kUnavailable;
    default: return http_code >= 500 ? Code::kUnavailable : Code::kInternal;
  }
}

}  // namespace

std::string UrlEncode(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

Status StatusFromResponse(int http_code, const std::string& body, const std::string& what) {
  std::string reason, message;
  auto parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object() && parsed.value("kind", "") == "Status") {
    reason = parsed.value("reason", "");
    message = parsed.value("message", "");
  }
  if (message.empty()) message = body.substr(0, 512);
  last_error = ApiError{http_code, reason};
  return Status(CodeForReason(reason, http_code),
                what + ": HTTP " + std::to_string(http_code) +
                    (reason.empty() ? "" : " " + reason) + ": " + message,
                reason);
}

std::optional<std::chrono::nanoseconds> RetryDelay(int http_code, const std::string& retry_after,
                                                   std::chrono::nanoseconds backoff,
                                                   std::chrono::seconds max_retry_after) {
  if (http_code != 429 && !(http_code >= 500 && !retry_after.empty())) return std::nullopt;
  if (retry_after.empty()) return backoff;
  // delta-seconds only: a date (the header's other form) is refused rather than guessed at.
  if (retry_after.size() > 9 || retry_after.find_first_not_of("0123456789") != std::string::npos) {
    return http_code == 429 ? std::optional<std::chrono::nanoseconds>(backoff) : std::nullopt;
  }
  return std::min<std::chrono::nanoseconds>(std::chrono::seconds(std::stol(retry_after)),
                                            max_retry_after);
}

KubeClient::KubeClient(std::unique_ptr<Transport> transport, Observer observe, ClientOptions options)
    : transport_(std::move(transport)), observe_(std::move(observe)), options_(options) {
  if (options_.qps > 0) {
    limiter_.emplace(options_.qps, std::max(options_.burst, 1), options_.clock->Now());
  }
}

void KubeClient::Pace(std::chrono::nanoseconds at_least) {
  std::chrono::nanoseconds wait{0};
  if (limiter_) {
    std::lock_guard lock(limiter_mu_);
    wait = limiter_->Reserve(options_.clock->Now());
  }
  wait = std::max(wait, at_least);
  if (wait <= std::chrono::nanoseconds::zero()) return;
  // Waited on alone: one request's Retry-After must not hold back the others.
  std::mutex mu;
  std::condition_variable cv;  // never notified: the clock's wait ends at its deadline
  std::unique_lock lock(mu);
  const auto deadline =
      options_.clock->Now() + std::chrono::duration_cast<Clock::TimePoint::duration>(wait);
  while (options_.clock->Now() < deadline) {
    options_.clock->WaitUntil(cv, lock, deadline, [] { return false; });
  }
}

Result<HttpResponse> KubeClient::SendPaced(const std::string& method, const std::string& path,
                                           const std::function<Result<HttpResponse>()>& send) {
  Backoff backoff(options_.retry_backoff);
  std::chrono::nanoseconds retry_after{0};
  for (int attempt = 0;; ++attempt) {
    Pace(retry_after);
    auto resp = send();
    if (!resp.ok()) return resp;
    auto delay = RetryDelay(resp->status, resp->retry_after, backoff.Next(), options_.max_retry_after);
    if (!delay || attempt >= options_.max_retries) return resp;
    if (observe_) observe_(method, std::to_string(resp->status));
    spdlog::warn("request refused for load method={} path={} code={} retry_after=\"{}\" attempt={} retry_in_ms={}",
                 method, path, resp->status, resp->retry_after, attempt + 1,
                 std::chrono::duration_cast<std::chrono::milliseconds>(*delay).count());
    retry_after = *delay;
  }
}

ApiError KubeClient::LastError() { return last_error; }

std::string KubeClient::Path(const ResourceType& type, const std::string& ns,
                             const std::string& name, const std::string& subresource) const {
  std::string p = type.group.empty() ? "/api/" + type.version
                                     : "/apis/" + type.group + "/" + type.version;
  if (type.namespaced && !ns.empty()) p += "/namespaces/" + UrlEncode(ns);
  p += "/" + type.plural;
  if (!name.empty()) p += "/" + UrlEncode(name);
  if (!subresource.empty()) p += "/" + subresource;
  return p;
}

namespace {

// Parses API server JSON; with drop_managed_fields, every "managedFields" member is skipped by
// the parser itself, so the DOM never holds it (stripping after the parse would leave its
// freed chunks scattered between live ones: memory the process keeps). No stasis type has a
// field of that name; in Kubernetes objects it only appears in metadata.
json ParseBody(std::string_view text, bool drop_managed_fields) {
  if (!drop_managed_fields) return json::parse(text, nullptr, /*allow_exceptions=*/false);
  json::parser_callback_t skip = [](int, json::parse_event_t event, json& parsed) {
    return !(event == json::parse_event_t::key && parsed.is_string() &&
             parsed.get_ref<const std::string&>() == "managedFields");
  };
  return json::parse(text, skip, /*allow_exceptions=*/false);
}

}  // namespace

Result<json> KubeClient::Send(const std::string& method, const std::string& path,
                              const std::string& body, const std::string& content_type,
                              bool drop_managed_fields) {
  HttpRequest req;
  req.method = method;
  req.path = path;
  req.body = body;
  req.content_type = content_type;
  auto resp = SendPaced(method, path, [&] { return transport_->Do(req); });
  if (!resp.ok()) {
    last_error = ApiError{0, ""};
    if (observe_) observe_(method, "<error>");
    return resp.status();
  }
  if (observe_) observe_(method, std::to_string(resp->status));
  if (resp->status < 200 || resp->status >= 300) {
    return StatusFromResponse(resp->status, resp->body, method + " " + path);
  }
  if (resp->body.empty()) return json::object();
  auto parsed = ParseBody(resp->body, drop_managed_fields);
  if (parsed.is_discarded()) {
    return Status(Code::kInternal, method + " " + path + ": response is not JSON");
  }
  return parsed;
}

Result<json> KubeClient::Get(const ResourceType& type, const std::string& ns,
                             const std::string& name) {
  return Send("GET", Path(type, ns, name), "", "");
}

Result<json> KubeClient::ListPage(const ResourceType& type, const std::string& ns,
                                  const ListOptions& o) {
  std::string q;
  auto add = [&](const std::string& k, const std::string& v) {
    if (!v.empty()) q += (q.empty() ? "?" : "&") + k + "=" + UrlEncode(v);
  };
  add("labelSelector", o.label_selector);
  add("fieldSelector", o.field_selector);
  if (o.limit > 0) add("limit", std::to_string(o.limit));
  add("continue", o.continue_token);
  add("resourceVersion", o.resource_version);
  return Send("GET", Path(type, ns) + q, "", "", o.drop_managed_fields);
}

Result<json> KubeClient::List(const ResourceType& type, const std::string& ns, ListOptions o) {
  json all;
  while (true) {
    auto page = ListPage(type, ns, o);
    if (!page.ok()) return page.status();
    std::string next = page->value("/metadata/continue"_json_pointer, "");
    if (all.is_null()) {
      all = std::move(*page);
      if (!all.contains("items") || all["items"].is_null()) all["items"] = json::array();
    } else {
      for (auto& item : (*page)["items"]) all["items"].push_back(std::move(item));
    }
    if (next.empty()) break;
    o.continue_token = next;
    o.resource_version.clear();  // not allowed together with continue
  }
  all["metadata"].erase("continue");
  return all;
}

Result<json> KubeClient::Create(const ResourceType& type, const std::string& ns, const json& obj) {
  return Send("POST", Path(type, ns), obj.dump(), "application/json");
}

Result<json> KubeClient::Update(const ResourceType& type, const json& obj) {
  return Send("PUT",
              Path(type, obj["metadata"].value("namespace", ""), obj["metadata"].value("name", "")),
              obj.dump(), "application/json");
}

Result<json> KubeClient::UpdateStatus(const ResourceType& type, const json& obj) {
  return Send("PUT",
              Path(type, obj["metadata"].value("namespace", ""), obj["metadata"].value("name", ""),
                   "status"),
              obj.dump(), "application/json");
}

Result<json> KubeClient::Patch(const ResourceType& type, const std::string& ns,
                               const std::string& name, PatchType patch_type, const json& patch,
                               const std::string& subresource) {
  const char* ct = patch_type == PatchType::kMerge ? "application/merge-patch+json"
                   : patch_type == PatchType::kJson ? "application/json-patch+json"
                                                    : "application/strategic-merge-patch+json";
  return Send("PATCH", Path(type, ns, name, subresource), patch.dump(), ct);
}

Status KubeClient::Delete(const ResourceType& type, const std::string& ns,
                          const std::string& name, const DeleteOptions& o) {
  json body = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
  if (o.precondition_uid) body["preconditions"]["uid"] = *o.precondition_uid;
  if (o.precondition_resource_version) {
    body["preconditions"]["resourceVersion"] = *o.precondition_resource_version;
  }
  if (o.grace_period_seconds) body["gracePeriodSeconds"] = *o.grace_period_seconds;
  auto r = Send("DELETE", Path(type, ns, name), body.dump(), "application/json");
  return r.ok() ? OkStatus() : r.status();
}

Status KubeClient::Watch(const ResourceType& type, const std::string& ns, const WatchOptions& o,
                         const std::function<bool(const json&)>& on_event,
                         const std::atomic<bool>* cancel) {
  if (o.resource_version.empty()) {
    // A watch from "" starts at "any" version and replays synthetic ADDs: never what a cache
    // that has just listed wants.
    return Status(Code::kInvalidArgument, "watch needs a resourceVersion from a list");
  }
  std::string q = "?watch=true&resourceVersion=" + UrlEncode(o.resource_version) +
                  "&timeoutSeconds=" + std::to_string(o.timeout_seconds);
  if (o.allow_bookmarks) q += "&allowWatchBookmarks=true";
  if (!o.label_selector.empty()) q += "&labelSelector=" + UrlEncode(o.label_selector);
  if (!o.field_selector.empty()) q += "&fieldSelector=" + UrlEncode(o.field_selector);
  HttpRequest req;
  req.path = Path(type, ns) + q;
  // Silence longer than the server's own timeout plus slack means the connection is dead.
  req.timeout = std::chrono::seconds(o.timeout_seconds + 30);
  Status result;
  auto resp = SendPaced("WATCH", req.path, [&] { return StreamOnce(req, o, on_event, cancel, result); });
  if (observe_) observe_("WATCH", resp.ok() ? std::to_string(resp->status) : "<error>");
  if (!resp.ok()) return resp.status();
  if (resp->status != 200) return StatusFromResponse(resp->status, resp->body, "watch " + req.path);
  return result;
}

Result<HttpResponse> KubeClient::StreamOnce(const HttpRequest& req, const WatchOptions& o,
                                            const std::function<bool(const json&)>& on_event,
                                            const std::atomic<bool>* cancel, Status& result) {
  return transport_->Stream(
      req,
      [&](std::string_view line) {
        auto event = ParseBody(line, o.drop_managed_fields);
        if (event.is_discarded() || !event.is_object()) {
          result = Status(Code::kInternal, "watch " + req.path + ": undecodable event");
          return false;
        }
        if (event.value("type", "") == "ERROR") {
          const auto& st = event["object"];
          result = StatusFromResponse(st.value("code", 500), st.dump(), "watch " + req.path);
          return false;
        }
        return on_event(event);
      },
      cancel);
}

Status RetryOnConflict(const std::function<Status()>& fn, int attempts,
                       std::chrono::milliseconds delay) {
  Backoff backoff(BackoffPolicy{delay, delay, 1.0, 0.1});
  Status s;
  for (int i = 0; i < attempts; ++i) {
    s = fn();
    if (s.code() != Code::kAborted) return s;
    std::this_thread::sleep_for(backoff.Next());
  }
  return s;
}

}  // namespace stasis
