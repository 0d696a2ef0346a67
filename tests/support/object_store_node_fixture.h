// The fixture of the `stasis node` end-to-end tests with an object store as --snapshot-store
// (tests/e2e/node_object_store*_test.cc): NodeAgentTest (node_agent_fixture.h) plus one real
// SeaweedFS per test binary (object_store.h), the agents' store environment, and the helpers
// that run an actor into the store and read what the store holds. Header-only: each test binary
// that includes it gets its own store.
#pragma once

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "snapshots/s3_client.h"
#include "tests/support/node_agent_fixture.h"
#include "tests/support/object_store.h"

namespace stasis::testing {

class ObjectStoreNodeTest : public NodeAgentTest {
 protected:
  static void SetUpTestSuite() {
    NodeAgentTest::SetUpTestSuite();
    object_store_ = ObjectStore::Start(&start_error_).release();
  }
  static void TearDownTestSuite() {
    delete object_store_;
    object_store_ = nullptr;
  }
  void SetUp() override {
    NodeAgentTest::SetUp();
    ASSERT_NE(object_store_, nullptr) << start_error_;
  }

  // The agent's environment: the store's endpoint and credentials, the standard variables.
  static std::vector<std::string> StoreEnv() {
    const S3Endpoint& e = object_store_->endpoint();
    return {"AWS_ENDPOINT_URL=" + e.url, "AWS_REGION=" + e.region,
            "AWS_ACCESS_KEY_ID=" + e.credentials.access_key_id,
            "AWS_SECRET_ACCESS_KEY=" + e.credentials.secret_access_key};
  }
  std::string StoreUrl() const { return "s3://" + object_store_->bucket() + "/" + ns_ + "/"; }
  Agent* StartStoreAgent(const std::string& name, const std::vector<std::string>& extra_args = {}) {
    return StartAgent(Node(name), PinnedRunsc(), StoreEnv(), 2, StoreUrl(), extra_args);
  }
  // Actor `name` created on `a`, run until its counter reaches `count`, then suspended into the
  // store; its counter then, and the SUSPENDED actor in *actor.
  long RunThenSuspend(Agent& a, const std::string& name, long count, nlohmann::json* actor) {
    using namespace std::chrono_literals;
    CreateActor(name, CounterSpec(a.node));
    EXPECT_TRUE(WaitStatus(name, "STATUS_RUNNING", 30s, actor));
    const long before = WaitCounter(a, name, count);
    Patch(name, {{"desiredState", "Suspended"}});
    EXPECT_TRUE(WaitStatus(name, "STATUS_SUSPENDED", 60s, actor));
    return before;
  }
  // A key file as a Secret volume with defaultMode 0400 holds it: 64 hex digits.
  std::string KeyFile(const std::string& name, char digit) {
    const std::filesystem::path p = work_.path() / name;
    std::ofstream(p) << std::string(64, digit) << "\n";
    chmod(p.c_str(), 0400);
    return p.string();
  }

  // The ids of the actor's snapshots whose manifest object is in the store's bucket (or
  // `bucket`), under this test's prefix.
  std::set<std::string> Committed(const std::string& actor, const std::string& bucket = "") const {
    S3Client client(object_store_->endpoint(), bucket.empty() ? object_store_->bucket() : bucket);
    const std::string prefix = ns_ + "/" + ns_ + "/" + actor + "/";
    std::set<std::string> ids;
    auto all = client.ListAllObjects(prefix);
    for (const auto& o : all.ok() ? *all : std::vector<S3Object>{}) {
      const std::string rest = o.key.substr(prefix.size());
      const size_t slash = rest.find('/');
      if (slash != std::string::npos && rest.substr(slash + 1) == "manifest.json") ids.insert(rest.substr(0, slash));
    }
    return ids;
  }

  static inline ObjectStore* object_store_ = nullptr;
  static inline std::string start_error_;
};

}  // namespace stasis::testing
