// The baseline of the pause-overhead benchmark: the same bundle run directly with runsc, in its
// own root, checkpointed and restored as the agent's driver calls runsc.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/subprocess.h"
#include "tests/bench/pause_overhead_common.h"
#include "tests/bench/pause_overhead_peer.h"

namespace stasis::pause_bench {

class DirectSandbox {
 public:
  explicit DirectSandbox(const Config& cfg);

  // Starts the sandbox (from a GPU bundle written by the agent's own code on a GPU run).
  void Start();

  struct Cycle {
    double checkpoint_ms = 0;
    double delete_ms = 0;
    double restore_ms = 0;
    double image_bytes = 0;
    // Diagnostics, not part of the baseline: what the agent's extra steps cost on this image.
    double sha256_ms = 0;  // sha256 of every image file (the manifest's hashing)
    double fsync_ms = 0;   // fsync of every image file (the manifest's durability)
    double remove_ms = 0;  // removing the previous image (the agent drops superseded snapshots)
    // --peer-object-store: curl's upload of the image and its download before the restore.
    double upload_ms = 0;
    double download_ms = 0;
  };

  // checkpoint (timed: the baseline) → delete -force → restore -detach (timed) from the new
  // image. Between them, as diagnostics of what the agent adds, the agent's own post-checkpoint
  // work is timed on this image the way the agent does it: sha256 and fsync of every file, and
  // the removal of the previous image (the agent drops superseded snapshots).
  Result<Cycle> Run();

  // Deletes the sandbox and releases the root's null-netns bind mount (runsc leaves it
  // mounted with -network=none), so that the work directory can be removed.
  void Stop();

 private:
  static constexpr const char* kId = "bench-direct";

  // The image's files, sorted, and their total size.
  static std::vector<std::string> ImageFiles(const std::filesystem::path& image, double& bytes);
  static double TimeSha256(const std::vector<std::string>& files);
  static double TimeFsync(const std::vector<std::string>& files);
  CommandResult Runsc(const std::vector<std::string>& args);
  // The image up to the peer store and back down into the same directory (upload_ms, download_ms).
  [[nodiscard]] Status ThroughPeer(const std::filesystem::path& image, const std::vector<std::string>& files,
                                   Cycle& c);

  const Config& cfg_;
  std::string bundle_;  // cfg_.bundle, or the GPU bundle written from it
  std::filesystem::path root_, images_, last_image_;
  std::optional<PeerObjectStore> peer_;
  int seq_ = 0;
  bool started_ = false;
};

}  // namespace stasis::pause_bench
