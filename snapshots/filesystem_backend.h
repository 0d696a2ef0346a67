// Committed snapshots in a directory (--snapshot-store): <root>/<ns>/<name>/<id>/, put there
// as <id>.partial/ — by hard link when the store is on the node root's file system, else by a
// copy hashed chunk by chunk as it is read — every byte read checked against the manifest, the
// manifest copied last, everything fsynced, then renamed. The directory may be a shared
// filesystem that other nodes (and other hands) write to: Fetch verifies every chunk in place.
#pragma once

#include <string>

#include "snapshots/committed_backend.h"

namespace stasis {

class FilesystemBackend final : public CommittedBackend {
 public:
  // link_same_fs: put by hard link when both roots share a file system (false: always copy).
  FilesystemBackend(std::string root, bool link_same_fs);

  std::string Location(const std::string& ns, const std::string& name, const std::string& id) const override;
  Result<PutOutcome> Put(const std::filesystem::path& source, const SnapshotManifest& m, bool just_completed) override;
  Result<Fetched> Fetch(const std::string& ns, const std::string& name, const std::string& id) const override;
  std::vector<SnapshotManifest> List(const std::string& ns, const std::string& name) const override;
  Result<bool> Has(const std::string& ns, const std::string& name, const std::string& id) const override;
  Status Remove(const std::string& ns, const std::string& name, const std::string& id) override;
  Status CheckWritable() const override;
  Result<int> RemoveLeftovers() override;
  std::string LocalRoot() const override { return root_; }
  void SetDigestThreads(int threads) override { digest_threads_ = threads; }
  bool CommitCopies(const std::filesystem::path& local_root) const override;

 private:
  std::string root_;
  bool link_same_fs_;
  int digest_threads_ = 0;
};

}  // namespace stasis
