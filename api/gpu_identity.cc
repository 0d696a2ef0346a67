#include "api/gpu_identity.h"

namespace stasis::api {

std::string Describe(const GpuIdentity& g) {
  return (g.model.empty() ? std::string("an unknown GPU model") : g.model) + ", driver " +
         (g.driver_version.empty() ? std::string("unknown") : g.driver_version);
}

std::string GpuMismatch(const GpuIdentity& taken_on, const GpuIdentity& gpu) {
  if (!taken_on.Known()) return "";
  if (!gpu.Known()) return "the snapshot was taken on " + Describe(taken_on) + "; this GPU publishes no identity";
  if (taken_on.model != gpu.model || taken_on.driver_version != gpu.driver_version) {
    return "the snapshot was taken on " + Describe(taken_on) + "; this GPU is " + Describe(gpu);
  }
  return "";
}

}  // namespace stasis::api
