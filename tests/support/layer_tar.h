// Image layers made in a test: tar members written with libarchive's writer (pax), plain or
// compressed, as a registry would serve them, and a file's sha256 taken over the file as written
// (not from the unpacker's stream, images/layer_unpack.h) to check its diff IDs.
#pragma once

#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include "images/layer_unpack.h"
#include "tests/support/sandbox.h"

namespace stasis::testing {

enum class TarType { kFile, kDir, kSymlink, kHardlink, kCharDevice, kFifo };

struct TarMember {
  std::string name;
  TarType type = TarType::kFile;
  std::string data;  // a file's content, a link's target
  int mode = 0644;
  int uid = 0;
  int gid = 0;
  time_t mtime = 1700000000;
};

TarMember TarFile(const std::string& name, const std::string& content, int mode = 0644);
TarMember TarDir(const std::string& name, int mode = 0755);
TarMember TarSymlink(const std::string& name, const std::string& target);
TarMember TarHardlink(const std::string& name, const std::string& target);
TarMember TarCharDevice(const std::string& name);  // 1,3: what /dev/null is
TarMember TarFifo(const std::string& name);

enum class TarFilter { kNone, kGzip, kZstd };

// Writes `members` in order as a pax tar to `path`, through `filter`. Fails the calling test
// (ASSERT_NO_FATAL_FAILURE) when libarchive refuses.
void WriteTar(const std::string& path, const std::vector<TarMember>& members, TarFilter filter = TarFilter::kNone);

// "sha256:<hex>" of the file's bytes ("" when unreadable).
std::string Sha256OfFile(const std::string& path);

// A root filesystem being built from layers, and beside it outside/sentinel, which no layer
// may reach: a refusal test checks Escapes() after each attempt.
class LayerWorkspace {
 public:
  // The name a layer's escape through a symlink to /etc would create there.
  static constexpr char kEtcProbe[] = "stasis-layer-escape-probe";

  LayerWorkspace();
  std::filesystem::path rootfs() const { return dir_.path() / "rootfs"; }
  std::filesystem::path outside() const { return dir_.path() / "outside"; }
  // Writes `members` as the next layer's blob (under layers/) and returns its path.
  std::string Blob(const std::vector<TarMember>& members, TarFilter filter = TarFilter::kNone);
  // Writes the next layer and applies it onto rootfs().
  Result<images::UnpackedLayer> Apply(const std::vector<TarMember>& members, TarFilter filter = TarFilter::kNone,
                                      const images::UnpackOptions& options = {});
  // "" when nothing was written outside rootfs(); else what was.
  std::string Escapes() const;

 private:
  TempDir dir_;
  int layers_ = 0;
};

}  // namespace stasis::testing
