// Who may read /metrics: the bearer token's parsing, the TokenReview and SubjectAccessReview
// as sent and as answered, the decision → HTTP code mapping, and the decision cache on a fake
// clock; then the authorizer over a scripted transport (which reviews it sends, what it caches,
// and that the API server refusing *this process* is never reported as the scraper's 403).
#include "controller/metrics_authorizer.h"

#include <gtest/gtest.h>

#include <deque>

#include "tests/support/fake_clock.h"

namespace stasis {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

TEST(BearerTokenTest, TakesTheTokenOfABearerHeaderOnly) {
  EXPECT_EQ(BearerToken("Bearer abc.def"), "abc.def");
  EXPECT_EQ(BearerToken("bearer abc"), "abc");
  EXPECT_EQ(BearerToken("BEARER  abc "), "abc");
  EXPECT_EQ(BearerToken(""), std::nullopt);
  EXPECT_EQ(BearerToken("Bearer "), std::nullopt);
  EXPECT_EQ(BearerToken("Bearer a b"), std::nullopt);
  EXPECT_EQ(BearerToken("Basic dXNlcjpwYXNz"), std::nullopt);
  EXPECT_EQ(BearerToken("Bearerabc"), std::nullopt);
}

TEST(TokenReviewTest, SendsTheTokenAndReadsTheUser) {
  EXPECT_EQ(TokenReviewFor("t0k"), json::parse(R"({"apiVersion":"authentication.k8s.io/v1",
      "kind":"TokenReview","spec":{"token":"t0k"}})"));
  auto user = ParseTokenReview(json::parse(R"({"status":{"authenticated":true,"user":{
      "username":"system:serviceaccount:monitoring:prometheus","uid":"u-1",
      "groups":["system:serviceaccounts","system:authenticated"],
      "extra":{"authentication.kubernetes.io/pod-name":["prometheus-0"]}}}})"));
  ASSERT_TRUE(user.ok()) << user.status().ToString();
  EXPECT_EQ(user->username, "system:serviceaccount:monitoring:prometheus");
  EXPECT_EQ(user->uid, "u-1");
  EXPECT_EQ(user->groups, (std::vector<std::string>{"system:serviceaccounts", "system:authenticated"}));
  EXPECT_EQ(user->extra["authentication.kubernetes.io/pod-name"][0], "prometheus-0");
}

TEST(TokenReviewTest, AnythingButAnAuthenticatedUserIsUnauthenticated) {
  auto rejected = ParseTokenReview(json::parse(
      R"({"status":{"authenticated":false,"error":"invalid bearer token"}})"));
  EXPECT_EQ(rejected.status().code(), Code::kUnauthenticated);
  EXPECT_NE(rejected.status().message().find("invalid bearer token"), std::string::npos);
  EXPECT_EQ(ParseTokenReview(json::parse(R"({"spec":{}})")).status().code(), Code::kUnauthenticated);
  EXPECT_EQ(ParseTokenReview(json::parse(R"({"status":"yes"})")).status().code(), Code::kUnauthenticated);
  EXPECT_EQ(ParseTokenReview(json::parse(R"({"status":{"authenticated":true,"user":{}}})"))
                .status().code(),
            Code::kUnauthenticated);
}

TEST(SubjectAccessReviewTest, AsksForTheNonResourceUrlAsTheReviewedUser) {
  ReviewedUser u{"alice", "u-2", {"g1"}, json{{"k", {"v"}}}};
  const json sar = SubjectAccessReviewFor(u, "/metrics", "get");
  EXPECT_EQ(sar["apiVersion"], "authorization.k8s.io/v1");
  EXPECT_EQ(sar["kind"], "SubjectAccessReview");
  EXPECT_EQ(sar["spec"], json::parse(R"({"user":"alice","uid":"u-2","groups":["g1"],
      "extra":{"k":["v"]},"nonResourceAttributes":{"path":"/metrics","verb":"get"}})"));
  // No uid and no extra: neither is sent (an empty extra is not the user's).
  const json bare = SubjectAccessReviewFor(ReviewedUser{"bob", "", {}, json::object()}, "/metrics", "get");
  EXPECT_FALSE(bare["spec"].contains("uid"));
  EXPECT_FALSE(bare["spec"].contains("extra"));
}

TEST(SubjectAccessReviewTest, OnlyAnAllowedAndNotDeniedAnswerAllows) {
  EXPECT_TRUE(ParseSubjectAccessReview(json::parse(R"({"status":{"allowed":true}})")).ok());
  Status no = ParseSubjectAccessReview(json::parse(R"({"status":{"allowed":false,"reason":"no rule"}})"));
  EXPECT_EQ(no.code(), Code::kPermissionDenied);
  EXPECT_EQ(no.message(), "no rule");
  EXPECT_EQ(ParseSubjectAccessReview(json::parse(R"({"status":{"allowed":true,"denied":true}})")).code(),
            Code::kPermissionDenied);
  EXPECT_EQ(ParseSubjectAccessReview(json::parse(R"({})")).code(), Code::kPermissionDenied);
}

TEST(AdmissionTest, DecisionsMapOntoHttpCodes) {
  EXPECT_EQ(AdmissionFor(OkStatus()).http_code, 200);
  EXPECT_EQ(AdmissionFor(Status(Code::kUnauthenticated, "")).http_code, 401);
  EXPECT_EQ(AdmissionFor(Status(Code::kPermissionDenied, "")).http_code, 403);
  EXPECT_EQ(AdmissionFor(Status(Code::kUnavailable, "")).http_code, 503);
  EXPECT_EQ(AdmissionFor(Status(Code::kInternal, "")).http_code, 503);
}

TEST(TokenHashTest, IsTheHexSha256) {
  EXPECT_EQ(TokenHash("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(DecisionCacheTest, KeepsAllowedAndRefusedDecisionsForTheirTtlOnly) {
  testing::FakeClock clock;
  DecisionCache cache(&clock, 60s, 10s);
  cache.Store("allowed", OkStatus());
  cache.Store("denied", Status(Code::kPermissionDenied, "no"));
  cache.Store("unknown", Status(Code::kUnauthenticated, "no"));
  cache.Store("failed", Status(Code::kUnavailable, "API down"));
  EXPECT_EQ(cache.Lookup("failed"), std::nullopt);  // a failed review is no decision
  clock.Advance(9s);
  ASSERT_TRUE(cache.Lookup("denied").has_value());
  EXPECT_EQ(cache.Lookup("denied")->code(), Code::kPermissionDenied);
  EXPECT_EQ(cache.Lookup("unknown")->code(), Code::kUnauthenticated);
  clock.Advance(1s);  // 10 s: refusals expire, so a new binding takes effect
  EXPECT_EQ(cache.Lookup("denied"), std::nullopt);
  EXPECT_EQ(cache.Lookup("unknown"), std::nullopt);
  clock.Advance(49s);
  ASSERT_TRUE(cache.Lookup("allowed").has_value());
  EXPECT_TRUE(cache.Lookup("allowed")->ok());
  clock.Advance(1s);  // 60 s: so does an allowed one (a revoked binding ends)
  EXPECT_EQ(cache.Lookup("allowed"), std::nullopt);
}

TEST(DecisionCacheTest, StaysBoundedUnderAFloodOfTokens) {
  testing::FakeClock clock;
  DecisionCache cache(&clock, 60s, 10s, 3);
  cache.Store("old", Status(Code::kUnauthenticated, ""));
  cache.Store("a", OkStatus());
  clock.Advance(11s);  // "old" expired
  cache.Store("b", OkStatus());
  cache.Store("c", OkStatus());  // full: the expired entry goes first
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_TRUE(cache.Lookup("a").has_value());
  cache.Store("d", OkStatus());  // full of live ones: all go
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_TRUE(cache.Lookup("d").has_value());
}

// Answers POSTs from a script, in order; records what was sent.
class ScriptedTransport : public Transport {
 public:
  std::deque<Result<HttpResponse>> answers;
  std::vector<HttpRequest> sent;
  Result<HttpResponse> Do(const HttpRequest& request) override {
    sent.push_back(request);
    if (answers.empty()) return Status(Code::kUnavailable, "script exhausted");
    auto a = answers.front();
    answers.pop_front();
    return a;
  }
  Result<HttpResponse> Stream(const HttpRequest&, const std::function<bool(std::string_view)>&,
                              const std::atomic<bool>*) override {
    return Status(Code::kInternal, "no streams");
  }
  std::string Host() const override { return "test"; }
};

HttpResponse Created(const json& body) { return HttpResponse{201, body.dump(), ""}; }

const json kAuthenticated = json::parse(
    R"({"status":{"authenticated":true,"user":{"username":"prom","groups":["g"]}}})");

class MetricsAuthorizerTest : public ::testing::Test {
 protected:
  MetricsAuthorizer NewAuthorizer() {
    MetricsAuthorizerOptions o;
    o.clock = &clock_;
    return MetricsAuthorizer(&transport_, o);
  }
  testing::FakeClock clock_;
  ScriptedTransport transport_;
};

TEST_F(MetricsAuthorizerTest, NoBearerTokenIsRefusedWithoutAReview) {
  auto a = NewAuthorizer();
  EXPECT_EQ(a.Admit("").http_code, 401);
  EXPECT_EQ(a.Admit("Basic dXNlcjpwYXNz").http_code, 401);
  EXPECT_TRUE(transport_.sent.empty());
}

TEST_F(MetricsAuthorizerTest, AnAllowedTokenIsReviewedOnceAMinute) {
  auto a = NewAuthorizer();
  transport_.answers = {Created(kAuthenticated), Created(json{{"status", {{"allowed", true}}}})};
  EXPECT_EQ(a.Admit("Bearer good").http_code, 200);
  ASSERT_EQ(transport_.sent.size(), 2u);
  EXPECT_EQ(transport_.sent[0].method, "POST");
  EXPECT_EQ(transport_.sent[0].path, "/apis/authentication.k8s.io/v1/tokenreviews");
  EXPECT_EQ(json::parse(transport_.sent[0].body)["spec"]["token"], "good");
  EXPECT_EQ(transport_.sent[1].path, "/apis/authorization.k8s.io/v1/subjectaccessreviews");
  const json sar = json::parse(transport_.sent[1].body);
  EXPECT_EQ(sar["spec"]["user"], "prom");
  EXPECT_EQ(sar["spec"]["nonResourceAttributes"]["path"], "/metrics");
  EXPECT_EQ(transport_.sent[1].timeout, std::chrono::milliseconds(5000));
  clock_.Advance(59s);
  EXPECT_EQ(a.Admit("Bearer good").http_code, 200);
  EXPECT_EQ(transport_.sent.size(), 2u);  // cached
  clock_.Advance(1s);
  transport_.answers = {Created(kAuthenticated), Created(json{{"status", {{"allowed", false}}}})};
  EXPECT_EQ(a.Admit("Bearer good").http_code, 403);  // reviewed again: the binding is gone
  EXPECT_EQ(transport_.sent.size(), 4u);
}

TEST_F(MetricsAuthorizerTest, AnUnauthenticatedTokenIsNotSentToAuthorization) {
  auto a = NewAuthorizer();
  transport_.answers = {Created(json{{"status", {{"authenticated", false}}}})};
  EXPECT_EQ(a.Admit("Bearer garbage").http_code, 401);
  EXPECT_EQ(transport_.sent.size(), 1u);
  EXPECT_EQ(a.Admit("Bearer garbage").http_code, 401);
  EXPECT_EQ(transport_.sent.size(), 1u);  // cached for deny_ttl
}

// The API server refusing this process's own review (its RBAC lacks create tokenreviews) or
// being unreachable says nothing about the scraper: 503, not 401/403, and not cached.
TEST_F(MetricsAuthorizerTest, AReviewThatFailsIsUnavailableAndRetried) {
  auto a = NewAuthorizer();
  transport_.answers = {HttpResponse{403, R"({"kind":"Status","reason":"Forbidden"})", ""}};
  EXPECT_EQ(a.Admit("Bearer good").http_code, 503);
  transport_.answers = {Created(kAuthenticated), HttpResponse{401, "{}", ""}};
  EXPECT_EQ(a.Admit("Bearer good").http_code, 503);
  transport_.answers = {Status(Code::kDeadlineExceeded, "timeout")};
  EXPECT_EQ(a.Admit("Bearer good").http_code, 503);
  transport_.answers = {Created(kAuthenticated), Created(json{{"status", {{"allowed", true}}}})};
  EXPECT_EQ(a.Admit("Bearer good").http_code, 200);
  EXPECT_EQ(transport_.sent.size(), 6u);
}

}  // namespace
}  // namespace stasis
