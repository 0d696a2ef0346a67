// What the GPU preflight concludes from running the cuda-checkpoint helper inside the sandbox.
// The helper is self-contained (its own loader and C library in api::kCudaCheckpointPrivateDir),
// so when it does not run, the first question is whether that directory is there at all: a
// missing interpreter makes execve fail with "no such file or directory" although the helper
// itself is present, which would send an operator looking in the wrong place.
#pragma once

#include <optional>
#include <string>

#include "base/status.h"

namespace stasis {

// One command run inside the sandbox: its exit status and standard error.
struct HelperRun {
  int exit_code = -1;
  std::string err;
};

// OK when `helper` (`<path> --help`) exited 0. Otherwise kFailedPrecondition, reason
// "cuda_checkpoint_missing", saying whether the private directory is missing (`loader`, the
// directory's loader run with --help, failed too) or the helper itself does not run. `loader`
// is nullopt when it was not run (the helper ran).
[[nodiscard]] Status JudgeHelperPreflight(const std::string& path, const HelperRun& helper,
                                          const std::optional<HelperRun>& loader);

}  // namespace stasis
