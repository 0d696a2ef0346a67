// What the object-store benchmark programs (tests/bench/object_store_*.cc) share: the store
// that hack/object-store.sh up exported, and one complete local snapshot to move.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>

#include "snapshots/s3_location.h"
#include "snapshots/snapshot_store.h"

namespace stasis::bench {

struct BenchStore {
  S3Endpoint endpoint;
  std::string bucket;
};

// AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and STASIS_S3_BUCKET;
// nullopt, said on stderr, when they are not all set.
inline std::optional<BenchStore> StoreFromEnvironment() {
  auto endpoint = S3EndpointFromSettings(EnvironmentSettings());
  const char* bucket = std::getenv("STASIS_S3_BUCKET");
  if (!endpoint.ok() || !bucket) {
    std::fprintf(stderr, "set the AWS_* variables and STASIS_S3_BUCKET (hack/object-store.sh up)\n");
    return std::nullopt;
  }
  return BenchStore{*endpoint, bucket};
}

// Snapshot bench/<name>/s0 completed in `store`: a pages.img that `fill` writes and a small
// checkpoint.img.
inline Result<SnapshotManifest> CompleteBenchSnapshot(SnapshotStore& store, const std::string& name,
                                                      const std::function<void(const std::filesystem::path&)>& fill) {
  auto partial = store.BeginLocal("bench", name, "s0");
  if (!partial.ok()) return partial.status();
  fill(std::filesystem::path(*partial) / "pages.img");
  std::ofstream(std::filesystem::path(*partial) / "checkpoint.img") << "state";
  SnapshotManifest m;
  m.id = "s0";
  m.ns = "bench";
  m.name = name;
  m.scope = "Full";
  m.trigger = "Suspend";
  return store.CompleteLocal(m);
}

}  // namespace stasis::bench
