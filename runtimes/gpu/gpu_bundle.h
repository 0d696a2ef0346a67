// The OCI bundle a GPU actor actually runs from. The user's bundle (spec.bundle) is never
// modified: the node agent writes <out_dir>/config.json, the user's config with root.path made
// absolute (so the rootfs stays where it is) and the CDI edits applied for
//   - the claimed worker's GPUs ("<gpu kind>=<uuid>": device nodes, driver libraries, env), and
//   - the cuda-checkpoint helper (manifests/cdi/stasis-cuda-checkpoint.yaml): the helper's
//     mount moved to the actor's spec.gpu.cudaCheckpointPath, and its private directory (its
//     own loader and C library) kept where the spec puts it.
// When asked (preload_library), the process also gets that library in LD_PRELOAD, before any
// the config already lists: the GPU fast-snapshot library of an actor that opted in.
// runsc is then run and restored with -bundle <out_dir> (and -nvproxy, see SandboxRef::gpu).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "runtimes/gpu/cdi.h"

namespace stasis {

struct GpuBundleRequest {
  std::string source_bundle;  // the actor's spec.bundle
  std::string out_dir;        // created if missing; its config.json is replaced atomically
  std::vector<std::string> gpu_uuids;
  std::string gpu_kind = "nvidia.com/gpu";
  std::string helper_device = "stasis.dev/cuda-checkpoint=helper";
  std::string cuda_checkpoint_path;  // where the helper must appear inside the container
  // Where the helper's private directory is mounted (api::kCudaCheckpointPrivateDir): the one
  // mount of the helper device that is not the helper itself.
  std::string helper_private_dir;
  // A library for process.env's LD_PRELOAD, put first (spec.gpu.fastSnapshot:
  // api::kFastSnapshotLibrary); empty: LD_PRELOAD is left as the config has it.
  std::string preload_library;
};

// The helper device's mounts with the helper's own moved to `cuda_checkpoint_path`: exactly one
// mount that is not at `private_dir` (the helper) and at most one at it (the directory; a spec
// without it still loads, and the preflight names what is missing). kInvalidArgument otherwise.
[[nodiscard]] Result<std::vector<CdiMount>> PlaceHelperMounts(
    std::vector<CdiMount> mounts, const std::string& device, const std::string& private_dir,
    const std::string& cuda_checkpoint_path);

// Puts `library` first in every LD_PRELOAD entry of oci's process.env (the loader reads the
// list separated by spaces or colons), adding LD_PRELOAD=<library> when there is none. What
// the config preloads is kept after it; a list that names the library already is left alone.
void PrependPreload(nlohmann::json& oci, const std::string& library);

// Returns out_dir. kNotFound/kInvalidArgument (from the CDI registry or the source bundle) say
// exactly which spec, device or file is missing; the source bundle is only read.
Result<std::string> WriteGpuBundle(const CdiRegistry& cdi, const GpuBundleRequest& request);

}  // namespace stasis
