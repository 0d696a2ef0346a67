// `stasis node`'s object-store codec flags are checked before the agent connects to anything:
// a compression level out of range, a key file others may read, or either flag with a
// directory store (or --snapshot-cache-bytes with one) fails RunNodeAgent at once with kInvalidArgument (exit code 2) and a message
// that names the flag — no API server is needed to see it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "reconcilers/node/node_agent.h"
#include "tests/support/sandbox.h"

namespace stasis {
namespace {

using ::testing::HasSubstr;

Status RunAgent(const std::string& store, const std::string& compression, const std::string& key,
                int64_t cache_bytes = 0) {
  NodeAgentOptions o;
  o.node = "n1";
  o.workers = {{}};
  o.kubeconfig = "/nonexistent/kubeconfig";  // never read: the flags fail first
  o.snapshot_store = store;
  o.snapshot_store_compression = compression;
  o.snapshot_store_encryption_key = key;
  o.snapshot_cache_bytes = cache_bytes;
  std::atomic<bool> stop{true};
  return RunNodeAgent(o, &stop);
}

TEST(NodeAgentStoreFlags, AreCheckedBeforeAnythingConnects) {
  testing::TempDir dir;
  const std::string open_key = (dir.path() / "key").string();
  std::ofstream(open_key) << std::string(64, 'a');
  chmod(open_key.c_str(), 0644);
  struct Case {
    std::string store, compression, key;
    const char* want;
  };
  const std::vector<Case> cases = {
      {"s3://bucket/p", "zstd:99", "", "--snapshot-store-compression is \"zstd:99\""},
      {"s3://bucket/p", "none", open_key, "has mode 0644"},
      {"", "zstd", "", "apply only to an s3:// --snapshot-store"},
      {"/var/lib/stasis/store", "none", open_key, "apply only to an s3:// --snapshot-store"},
  };
  for (const Case& c : cases) {
    const Status s = RunAgent(c.store, c.compression, c.key);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr(c.want));
  }
  // A directory store is the store itself: nothing in it is a cache to evict.
  for (const std::string store : {"", "/var/lib/stasis/store"}) {
    const Status s = RunAgent(store, "none", "", 1 << 30);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr("--snapshot-cache-bytes applies only to an s3:// --snapshot-store"));
  }
}

}  // namespace
}  // namespace stasis
