// Who may read /metrics, decided by the API server, as kube-rbac-proxy and controller-runtime's
// filters.WithAuthenticationAndAuthorization decide it: the request's bearer token goes to a
// TokenReview (authentication.k8s.io/v1); the user it names, with its groups, uid and extra,
// to a SubjectAccessReview (authorization.k8s.io/v1) for the non-resource URL `get /metrics`.
// No token or a token the API server rejects: 401. A user RBAC does not allow: 403. A review
// that could not be made (API server unreachable, or this process not allowed to create
// reviews): 503, and logged, so a broken setup is never mistaken for a denied scraper.
//
// Invariants: a token is never logged nor kept; decisions are cached under the token's
// SHA-256, an allowed one for `allow_ttl`, a refused one for `deny_ttl` (shorter, so that a
// new binding takes effect soon); a failed review is never cached. Decide blocks for up to two
// reviews of `review_timeout` each: call it off any loop that must stay responsive.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/status.h"
#include "controller/transport.h"

namespace stasis {

// The user a TokenReview authenticated.
struct ReviewedUser {
  std::string username, uid;
  std::vector<std::string> groups;
  nlohmann::json extra = nlohmann::json::object();  // {key: [values]}
};

// The token of "Bearer <token>" (scheme case-insensitive); nullopt for anything else.
std::optional<std::string> BearerToken(const std::string& authorization);
// The TokenReview to create for `token` (no audiences: the API server's own).
nlohmann::json TokenReviewFor(const std::string& token);
// The reviewed user; kUnauthenticated (with status.error, if any) when not authenticated.
Result<ReviewedUser> ParseTokenReview(const nlohmann::json& review);
// The SubjectAccessReview asking whether `user` may `verb` the non-resource URL `path`.
nlohmann::json SubjectAccessReviewFor(const ReviewedUser& user, const std::string& path,
                                      const std::string& verb);
// OK when allowed; kPermissionDenied (with status.reason) otherwise, explicit denials included.
Status ParseSubjectAccessReview(const nlohmann::json& review);

// What the endpoint answers for a decision.
struct Admission {
  int http_code;  // 200 (admitted), 401, 403 or 503
  std::string message;
};
Admission AdmissionFor(const Status& decision);

// The lower-case hex SHA-256 of a token: the cache's key, never the token itself.
std::string TokenHash(const std::string& token);

// Decisions by token hash, each until its expiry on `clock`. Holds at most `max_entries`:
// expired ones go first, then (a flood of distinct tokens) everything. Thread-safe.
class DecisionCache {
 public:
  DecisionCache(Clock* clock, std::chrono::seconds allow_ttl, std::chrono::seconds deny_ttl,
                size_t max_entries = 4096);
  std::optional<Status> Lookup(const std::string& token_hash);
  // Keeps OK for allow_ttl and kUnauthenticated / kPermissionDenied for deny_ttl; other
  // codes (a review that failed) are not decisions and are not kept.
  void Store(const std::string& token_hash, const Status& decision);
  size_t size() const;

 private:
  struct Entry {
    Status decision;
    Clock::TimePoint expiry;
  };
  Clock* clock_;
  std::chrono::seconds allow_ttl_, deny_ttl_;
  size_t max_entries_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> entries_;
};

struct MetricsAuthorizerOptions {
  std::string path = "/metrics";
  std::string verb = "get";
  std::chrono::seconds allow_ttl{60};
  std::chrono::seconds deny_ttl{10};
  // The deadline of each network operation of one review.
  std::chrono::milliseconds review_timeout{std::chrono::seconds(5)};
  Clock* clock = &RealClock::Get();  // not owned
};

class MetricsAuthorizer {
 public:
  // Reviews go through `transport` (not owned), with this process's own credentials. They
  // bypass the client's rate limiter and its retries: a scrape must not queue behind the
  // controllers' requests, and a cached decision makes reviews rare.
  explicit MetricsAuthorizer(Transport* transport, MetricsAuthorizerOptions options = {});

  // OK, kUnauthenticated, kPermissionDenied, or kUnavailable when a review failed. Blocks.
  Status Decide(const std::string& authorization_header);
  Admission Admit(const std::string& authorization_header) {
    return AdmissionFor(Decide(authorization_header));
  }

 private:
  Result<nlohmann::json> Create(const std::string& path, const nlohmann::json& review);
  Status Review(const std::string& token);

  Transport* transport_;
  MetricsAuthorizerOptions options_;
  DecisionCache cache_;
};

}  // namespace stasis
