// Optimistic concurrency against a real kube-apiserver: two writers of one ConfigMap that read
// the same resourceVersion (one wins, the other gets 409 Conflict as kAborted), RetryOnConflict
// from two threads converging with no lost update, and delete preconditions.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "controller/kube_client.h"
#include "controller/rest_config.h"
#include "tests/support/control_plane.h"

namespace stasis {
namespace {

using testing::ControlPlane;

const ResourceType kConfigMaps{"", "v1", "configmaps", true};

std::unique_ptr<KubeClient> NewClient() { return testing::ControlPlane::Get().NewClient(); }

json Counter(const std::string& name) {
  return {{"metadata", {{"name", name}}}, {"data", {{"counter", "0"}, {"writer", "none"}}}};
}

class ConflictTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ns_ = ControlPlane::Get().CreateTestNamespace("conflict");
    ASSERT_FALSE(ns_.empty());
    client_ = NewClient();
  }
  std::string ns_;
  std::unique_ptr<KubeClient> client_;
};

TEST_F(ConflictTest, SecondWriterOfTheSameResourceVersionGetsConflict) {
  ASSERT_TRUE(client_->Create(kConfigMaps, ns_, Counter("cm")).ok());
  auto other = NewClient();  // a second, independent client: its own connections

  auto a = client_->Get(kConfigMaps, ns_, "cm");
  auto b = other->Get(kConfigMaps, ns_, "cm");
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string rv = (*a)["metadata"]["resourceVersion"];
  ASSERT_EQ((*b)["metadata"]["resourceVersion"], rv);

  (*a)["data"]["writer"] = "a";
  auto first = client_->Update(kConfigMaps, *a);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_NE((*first)["metadata"]["resourceVersion"], rv);

  (*b)["data"]["writer"] = "b";
  auto second = other->Update(kConfigMaps, *b);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Code::kAborted) << second.status().ToString();
  EXPECT_EQ(second.status().reason(), "Conflict");
  EXPECT_EQ(KubeClient::LastError().http_code, 409);
  EXPECT_EQ(KubeClient::LastError().reason, "Conflict");

  // The loser's write did not land.
  auto now = client_->Get(kConfigMaps, ns_, "cm");
  ASSERT_TRUE(now.ok());
  EXPECT_EQ((*now)["data"]["writer"], "a");
  EXPECT_EQ((*now)["metadata"]["resourceVersion"], (*first)["metadata"]["resourceVersion"]);
}

TEST_F(ConflictTest, RetryOnConflictFromTwoThreadsLosesNoUpdate) {
  ASSERT_TRUE(client_->Create(kConfigMaps, ns_, Counter("cm")).ok());
  constexpr int kThreads = 2;
  constexpr int kIncrements = 20;

  std::mutex mu;
  std::vector<int> written;  // every counter value a successful update wrote
  std::atomic<int> conflicts{0};
  std::atomic<int> failures{0};

  auto run = [&](int id) {
    auto client = NewClient();
    for (int i = 0; i < kIncrements; ++i) {
      int wrote = -1;
      // Each attempt re-reads, so a retry increments the value the winner wrote. Two writers
      // hammering one object can lose several rounds in a row; 50 attempts keeps the test
      // about convergence, not about the default budget of 5.
      Status s = RetryOnConflict(
          [&]() -> Status {
            auto cm = client->Get(kConfigMaps, ns_, "cm");
            if (!cm.ok()) return cm.status();
            const int next = std::stoi((*cm)["data"]["counter"].get<std::string>()) + 1;
            (*cm)["data"]["counter"] = std::to_string(next);
            (*cm)["data"]["writer"] = "thread-" + std::to_string(id);
            auto updated = client->Update(kConfigMaps, *cm);
            if (!updated.ok()) {
              if (updated.status().code() == Code::kAborted) conflicts++;
              return updated.status();
            }
            wrote = next;
            return OkStatus();
          },
          /*attempts=*/50);
      if (!s.ok()) {
        failures++;
        ADD_FAILURE() << "thread " << id << " increment " << i << ": " << s.ToString();
        continue;
      }
      std::lock_guard<std::mutex> lock(mu);
      written.push_back(wrote);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(run, t);
  for (auto& t : threads) t.join();

  ASSERT_EQ(failures.load(), 0);
  auto final_cm = client_->Get(kConfigMaps, ns_, "cm");
  ASSERT_TRUE(final_cm.ok());
  EXPECT_EQ((*final_cm)["data"]["counter"], std::to_string(kThreads * kIncrements));
  // No lost update: the successful writes are exactly 1..40, each once.
  std::sort(written.begin(), written.end());
  std::vector<int> want(kThreads * kIncrements);
  for (size_t i = 0; i < want.size(); ++i) want[i] = static_cast<int>(i) + 1;
  EXPECT_EQ(written, want);
  // Informational: how often the two writers actually collided.
  std::cout << "conflicts retried: " << conflicts.load() << "\n";
}

// No API server needed: the helper's own contract.
TEST(RetryOnConflictTest, GivesUpAfterItsAttemptsAndPassesOtherErrorsThrough) {
  int calls = 0;
  Status s = RetryOnConflict(
      [&] {
        calls++;
        return Status(Code::kAborted, "always conflicting", "Conflict");
      },
      3, std::chrono::milliseconds(1));
  EXPECT_EQ(s.code(), Code::kAborted);
  EXPECT_EQ(calls, 3);
  // Any other error is returned at once, not retried.
  calls = 0;
  s = RetryOnConflict([&] {
    calls++;
    return Status(Code::kNotFound, "gone");
  });
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_EQ(calls, 1);
}

TEST_F(ConflictTest, DeletePreconditions) {
  auto created = client_->Create(kConfigMaps, ns_, Counter("cm"));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  const std::string uid = (*created)["metadata"]["uid"];
  const std::string stale_rv = (*created)["metadata"]["resourceVersion"];
  // Move the object on, so the resourceVersion read at creation is stale.
  ASSERT_TRUE(client_->Patch(kConfigMaps, ns_, "cm", PatchType::kMerge, {{"data", {{"counter", "1"}}}}).ok());

  DeleteOptions stale;
  stale.precondition_resource_version = stale_rv;
  Status s = client_->Delete(kConfigMaps, ns_, "cm", stale);
  EXPECT_EQ(s.code(), Code::kAborted) << s.ToString();
  EXPECT_EQ(KubeClient::LastError().http_code, 409);
  EXPECT_EQ(KubeClient::LastError().reason, "Conflict");

  DeleteOptions wrong_uid;
  wrong_uid.precondition_uid = "00000000-0000-0000-0000-000000000000";
  s = client_->Delete(kConfigMaps, ns_, "cm", wrong_uid);
  EXPECT_EQ(s.code(), Code::kAborted) << s.ToString();
  EXPECT_EQ(KubeClient::LastError().http_code, 409);
  ASSERT_TRUE(client_->Get(kConfigMaps, ns_, "cm").ok()) << "a failed precondition deleted the object";

  DeleteOptions right;
  right.precondition_uid = uid;
  s = client_->Delete(kConfigMaps, ns_, "cm", right);
  EXPECT_TRUE(s.ok()) << s.ToString();
  auto gone = client_->Get(kConfigMaps, ns_, "cm");
  EXPECT_EQ(gone.status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace stasis
