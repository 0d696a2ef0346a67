// Sandbox ids (reconcilers/node/sandbox_id.h): short for any name the API accepts, stable,
// distinct for distinct actors, and made only of characters runsc takes.
#include "reconcilers/node/sandbox_id.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace stasis {
namespace {

TEST(SandboxIdTest, ShortStableAndReadableForEveryNameLength) {
  const std::string ns(63, 'n');
  for (size_t n : {1, 12, 13, 63, 84, 253}) {
    const std::string name(n, 'a');
    const std::string id = SandboxIdFor(ns, name);
    EXPECT_LE(id.size(), 29u) << n;
    EXPECT_EQ(id, SandboxIdFor(ns, name)) << "not stable";
    EXPECT_EQ(id.substr(0, std::min<size_t>(n, 12)), name.substr(0, 12));
    EXPECT_TRUE(IsUsableSandboxId(id)) << id;
  }
}

TEST(SandboxIdTest, DistinctActorsGetDistinctIds) {
  std::set<std::string> ids;
  // The same long prefix, the same name in another namespace, and "<ns>/<name>" splits that
  // would concatenate alike.
  for (const auto& [ns, name] : std::vector<std::pair<std::string, std::string>>{
           {"default", "worker-000000000001"}, {"default", "worker-000000000002"},
           {"other", "worker-000000000001"}, {"a-b", "c"}, {"a", "b-c"}}) {
    ids.insert(SandboxIdFor(ns, name));
  }
  EXPECT_EQ(ids.size(), 5u);
}

TEST(SandboxIdTest, ThePrefixNeverEndsInASeparator) {
  const std::string id = SandboxIdFor("default", "abcdefghijk-xyz");  // 12th character is '-'
  EXPECT_EQ(id.substr(0, 12), "abcdefghijk-");
  EXPECT_EQ(id.find("--"), std::string::npos) << id;
}

TEST(SandboxIdTest, OnlySafeRecordedIdsAreUsed) {
  EXPECT_TRUE(IsUsableSandboxId("default_counter"));  // an older agent's "<ns>_<name>"
  EXPECT_FALSE(IsUsableSandboxId(""));
  EXPECT_FALSE(IsUsableSandboxId(".."));
  EXPECT_FALSE(IsUsableSandboxId("a/b"));
  EXPECT_FALSE(IsUsableSandboxId(std::string(256, 'a')));
}

}  // namespace
}  // namespace stasis
