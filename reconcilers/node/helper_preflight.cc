#include "reconcilers/node/helper_preflight.h"

#include "api/names.h"

namespace stasis {
namespace {

constexpr char kHelperMissing[] = "cuda_checkpoint_missing";

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string ExitAndError(const HelperRun& run) {
  const std::string err = Trimmed(run.err);
  return "exit " + std::to_string(run.exit_code) + (err.empty() ? "" : ": " + err);
}

}  // namespace

Status JudgeHelperPreflight(const std::string& path, const HelperRun& helper,
                            const std::optional<HelperRun>& loader) {
  if (helper.exit_code == 0) return OkStatus();
  if (loader && loader->exit_code != 0) {
    return Status(Code::kFailedPrecondition,
                  std::string("the cuda-checkpoint helper's private directory ") +
                      api::kCudaCheckpointPrivateDir +
                      " is not in the container: its loader " + api::kCudaCheckpointPrivateLoader +
                      " does not run (" + ExitAndError(*loader) + "), so " + path +
                      " cannot start; the stasis.dev/cuda-checkpoint CDI spec must mount the "
                      "directory (manifests/cdi/stasis-cuda-checkpoint.yaml)",
                  kHelperMissing);
  }
  return Status(Code::kFailedPrecondition,
                "the cuda-checkpoint binary " + path + " does not run inside the container (" +
                    ExitAndError(helper) + ")",
                kHelperMissing);
}

}  // namespace stasis
