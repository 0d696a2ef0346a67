// Real gVisor sandboxes for tests: the pinned runsc (built and cached by hack/runsc.sh), and
// OCI bundles whose root filesystem is Debian's busybox-static.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "base/subprocess.h"

namespace stasis::testing {

// The runsc that hack/runsc.sh builds (or $STASIS_RUNSC when set). Aborts when it cannot be
// had: a test that needs runsc must not silently pass without it.
const std::string& PinnedRunsc();

// A shell loop that writes an ever-increasing counter to /tmp/counter ten times a second.
std::vector<std::string> CounterArgs();

// `cat /tmp/counter` in container `id` under runsc root `root`, or -1 when it cannot be read.
// The loop rewrites the file in place (truncate, then write), so an empty read is a read
// between the two and is tried again.
long ReadCounterIn(const std::string& root, const std::string& id);

// A temporary OCI bundle: rootfs/ with busybox and its applets, config.json running `args`
// with `capabilities`. Removed with everything under it when destroyed. Made under `parent`
// when given (an agent's --bundle-root), else under TestBundleRoot().
class Bundle {
 public:
  explicit Bundle(const std::vector<std::string>& args, const std::filesystem::path& parent = {},
                  const std::vector<std::string>& capabilities = {"CAP_KILL"});
  ~Bundle();
  Bundle(const Bundle&) = delete;
  Bundle& operator=(const Bundle&) = delete;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

// The --bundle-root of agents that use Bundle's default parent: <tmp>/stasis-test-bundles,
// created on first use. It holds bundles only: never an agent's --root or store.
const std::filesystem::path& TestBundleRoot();

// The project's helper CDI spec (manifests/cdi/stasis-cuda-checkpoint.yaml) with its host paths
// pointed at this build's self-contained helper (build/cuda-checkpoint/); without its private
// directory's mount (an outdated spec) when asked. "" when the shipped spec has changed shape.
std::string HelperSpecForThisBuild(bool with_private_dir);

// A runsc root directory and the containers started in it; every container is force-deleted
// and the directory removed when destroyed, so a failing test leaks no sandbox.
class RunscRoot {
 public:
  RunscRoot();
  ~RunscRoot();
  const std::filesystem::path& dir() const { return dir_; }
  // runsc -root <dir> -network=none ARGS… (argv only, 120 s deadline, stdio to a log file).
  CommandResult Run(const std::vector<std::string>& args);
  // `cat /tmp/counter` inside the container, or -1.
  long ReadCounter(const std::string& id);
  void Track(const std::string& id) { ids_.push_back(id); }

 private:
  std::filesystem::path dir_;
  std::vector<std::string> ids_;
};

// A fresh temporary directory, removed when destroyed.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "stasis-test-");
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  // Writes `content` to `name` under the directory (parents made; mode 0755 when
  // `executable`) and returns its path.
  std::string Write(const std::string& name, const std::string& content, bool executable = false) const;
  // The content of `name` under the directory ("" when missing).
  std::string Read(const std::string& name) const;

 private:
  std::filesystem::path path_;
};

// Rewrites runsc_version in checkpoint.img's metadata header (magic "gVisorSF", 8-byte
// big-endian length, JSON string map; reference/runsc.md §8): an image runsc takes for one
// written by another build. Fails the calling test (ASSERT_NO_FATAL_FAILURE) on an unknown layout.
void PatchRunscVersion(const std::filesystem::path& checkpoint_img, const std::string& version);

}  // namespace stasis::testing
