// The OCI bundle a GPU actor actually runs from. The user's bundle (spec.bundle) is never
// modified: the node agent writes <out_dir>/config.json, the user's config with root.path made
// absolute (so the rootfs stays where it is) and the CDI edits applied for
//   - the claimed worker's GPUs ("<gpu kind>=<uuid>": device nodes, driver libraries, env), and
//   - the cuda-checkpoint helper (manifests/cdi/stasis-cuda-checkpoint.yaml): the helper's
//     mount moved to the actor's spec.gpu.cudaCheckpointPath, and its private directory (its
//     own loader and C library) kept where the spec puts it.
// runsc is then run and restored with -bundle <out_dir> (and -nvproxy, see SandboxRef::gpu).
#pragma once

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
};

// The helper device's mounts with the helper's own moved to `cuda_checkpoint_path`: exactly one
// mount that is not at `private_dir` (the helper) and at most one at it (the directory; a spec
// without it still loads, and the preflight names what is missing). kInvalidArgument otherwise.
[[nodiscard]] Result<std::vector<CdiMount>> PlaceHelperMounts(
    std::vector<CdiMount> mounts, const std::string& device, const std::string& private_dir,
    const std::string& cuda_checkpoint_path);

// Returns out_dir. kNotFound/kInvalidArgument (from the CDI registry or the source bundle) say
// exactly which spec, device or file is missing; the source bundle is only read.
Result<std::string> WriteGpuBundle(const CdiRegistry& cdi, const GpuBundleRequest& request);

}  // namespace stasis
