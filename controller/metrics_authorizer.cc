#include "controller/metrics_authorizer.h"

#include <openssl/evp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>

namespace stasis {

using json = nlohmann::json;

std::optional<std::string> BearerToken(const std::string& authorization) {
  const std::string scheme = "bearer ";
  if (authorization.size() <= scheme.size()) return std::nullopt;
  for (size_t i = 0; i < scheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != scheme[i]) return std::nullopt;
  }
  std::string token = authorization.substr(scheme.size());
  token.erase(0, token.find_first_not_of(' '));
  token.erase(token.find_last_not_of(" \t") + 1);
  if (token.empty() || token.find_first_of(" \t") != std::string::npos) return std::nullopt;
  return token;
}

json TokenReviewFor(const std::string& token) {
  return {{"apiVersion", "authentication.k8s.io/v1"},
          {"kind", "TokenReview"},
          {"spec", {{"token", token}}}};
}

Result<ReviewedUser> ParseTokenReview(const json& review) {
  const json status = review.value("status", json::object());
  if (!status.is_object() || !status.value("authenticated", false)) {
    std::string error = status.is_object() ? status.value("error", "") : "";
    return Status(Code::kUnauthenticated,
                  error.empty() ? "token not authenticated" : "token not authenticated: " + error);
  }
  const json user = status.value("user", json::object());
  ReviewedUser u;
  u.username = user.value("username", "");
  u.uid = user.value("uid", "");
  for (const auto& g : user.value("groups", json::array())) {
    if (g.is_string()) u.groups.push_back(g.get<std::string>());
  }
  if (user.contains("extra") && user["extra"].is_object()) u.extra = user["extra"];
  // An authenticated review always names its user; one that does not grants nothing.
  if (u.username.empty()) return Status(Code::kUnauthenticated, "token review named no user");
  return u;
}

json SubjectAccessReviewFor(const ReviewedUser& user, const std::string& path,
                            const std::string& verb) {
  json spec = {{"user", user.username},
               {"groups", user.groups},
               {"nonResourceAttributes", {{"path", path}, {"verb", verb}}}};
  if (!user.uid.empty()) spec["uid"] = user.uid;
  if (!user.extra.empty()) spec["extra"] = user.extra;
  return {{"apiVersion", "authorization.k8s.io/v1"},
          {"kind", "SubjectAccessReview"},
          {"spec", spec}};
}

Status ParseSubjectAccessReview(const json& review) {
  const json status = review.value("status", json::object());
  if (!status.is_object()) return Status(Code::kPermissionDenied, "no review status");
  // denied=true wins over allowed (the API says both are never set; trust neither alone).
  if (status.value("allowed", false) && !status.value("denied", false)) return OkStatus();
  std::string reason = status.value("reason", "");
  return Status(Code::kPermissionDenied, reason.empty() ? "not allowed" : reason);
}

Admission AdmissionFor(const Status& decision) {
  switch (decision.code()) {
    case Code::kOk:
      return {200, "ok"};
    case Code::kUnauthenticated:
      return {401, "Unauthorized\n"};
    case Code::kPermissionDenied:
      return {403, "Forbidden\n"};
    default:
      return {503, "metrics authorization unavailable\n"};
  }
}

std::string TokenHash(const std::string& token) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(token.data(), token.size(), digest, &len, EVP_sha256(), nullptr);
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 0xf];
  }
  return hex;
}

DecisionCache::DecisionCache(Clock* clock, std::chrono::seconds allow_ttl,
                             std::chrono::seconds deny_ttl, size_t max_entries)
    : clock_(clock), allow_ttl_(allow_ttl), deny_ttl_(deny_ttl), max_entries_(max_entries) {}

std::optional<Status> DecisionCache::Lookup(const std::string& token_hash) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(token_hash);
  if (it == entries_.end()) return std::nullopt;
  if (clock_->Now() >= it->second.expiry) {
    entries_.erase(it);
    return std::nullopt;
  }
  return it->second.decision;
}

void DecisionCache::Store(const std::string& token_hash, const Status& decision) {
  std::chrono::seconds ttl;
  if (decision.ok()) {
    ttl = allow_ttl_;
  } else if (decision.code() == Code::kUnauthenticated ||
             decision.code() == Code::kPermissionDenied) {
    ttl = deny_ttl_;
  } else {
    return;
  }
  if (ttl <= std::chrono::seconds::zero()) return;
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = clock_->Now();
  if (entries_.size() >= max_entries_) {
    std::erase_if(entries_, [&](const auto& e) { return now >= e.second.expiry; });
  }
  if (entries_.size() >= max_entries_) entries_.clear();
  entries_[token_hash] = Entry{decision, now + ttl};
}

size_t DecisionCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

MetricsAuthorizer::MetricsAuthorizer(Transport* transport, MetricsAuthorizerOptions options)
    : transport_(transport),
      options_(std::move(options)),
      cache_(options_.clock, options_.allow_ttl, options_.deny_ttl) {}

// POSTs a review. Any failure, including the API server refusing this process (401/403), is
// kUnavailable: it says nothing about the scraper.
Result<json> MetricsAuthorizer::Create(const std::string& path, const json& review) {
  HttpRequest req;
  req.method = "POST";
  req.path = path;
  req.body = review.dump();
  req.timeout = options_.review_timeout;
  auto resp = transport_->Do(req);
  if (!resp.ok()) return Status(Code::kUnavailable, resp.status().message());
  if (resp->status < 200 || resp->status > 299) {
    return Status(Code::kUnavailable, "HTTP " + std::to_string(resp->status));
  }
  json out = json::parse(resp->body, nullptr, false);
  if (out.is_discarded()) return Status(Code::kUnavailable, "review answer is not JSON");
  return out;
}

Status MetricsAuthorizer::Review(const std::string& token) {
  auto tr = Create("/apis/authentication.k8s.io/v1/tokenreviews", TokenReviewFor(token));
  if (!tr.ok()) return Status(tr.status().code(), "token review: " + tr.status().message());
  auto user = ParseTokenReview(*tr);
  if (!user.ok()) return user.status();
  auto sar = Create("/apis/authorization.k8s.io/v1/subjectaccessreviews",
                    SubjectAccessReviewFor(*user, options_.path, options_.verb));
  if (!sar.ok()) return Status(sar.status().code(), "subject access review: " + sar.status().message());
  Status allowed = ParseSubjectAccessReview(*sar);
  if (!allowed.ok()) {
    spdlog::info("component=metrics_authorizer op=authorize user={} result=denied reason=\"{}\"",
                 user->username, allowed.message());
  }
  return allowed;
}

Status MetricsAuthorizer::Decide(const std::string& authorization_header) {
  auto token = BearerToken(authorization_header);
  if (!token) return Status(Code::kUnauthenticated, "no bearer token");
  const std::string key = TokenHash(*token);
  if (auto cached = cache_.Lookup(key)) return *cached;
  Status decision = Review(*token);
  if (decision.code() == Code::kUnavailable) {
    spdlog::warn("component=metrics_authorizer op=review result=error error=\"{}\"", decision.message());
  }
  cache_.Store(key, decision);
  return decision;
}

}  // namespace stasis
