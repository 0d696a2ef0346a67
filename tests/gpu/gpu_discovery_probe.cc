// What each source of `stasis node --gpus=auto` finds on this machine, one line per source, so
// that a GPU machine can show they agree (NVML, the kernel module's /proc files, nvidia-smi).
// Built by hack/gpu-discovery-proof.sh from the same sources as the agent; exits 1 when a
// source that exists here disagrees with NVML.
#include <cstdio>
#include <string>

#include "runtimes/gpu/gpu_discovery.h"
#include "runtimes/gpu/nvml.h"

namespace {

using stasis::GpuInventory;
using stasis::Result;

std::string Line(const char* name, const Result<GpuInventory>& r) {
  if (!r.ok()) return std::string(name) + " error=\"" + r.status().ToString() + "\"";
  std::string out = std::string(name) + " source=" + r->source + " driver=" + r->driver_version +
                    " cuda=" + (r->cuda_version.empty() ? "-" : r->cuda_version);
  for (const auto& g : r->gpus) out += " gpu=" + g.uuid + "|" + g.model;
  return out;
}

// Same GPUs, models and driver (the CUDA version only NVML gives).
bool Agrees(const Result<GpuInventory>& a, const Result<GpuInventory>& b) {
  if (!a.ok() || !b.ok()) return true;  // a source that is not here says nothing
  if (a->driver_version != b->driver_version || a->gpus.size() != b->gpus.size()) return false;
  for (size_t i = 0; i < a->gpus.size(); ++i) {
    if (a->gpus[i].uuid != b->gpus[i].uuid || a->gpus[i].model != b->gpus[i].model) return false;
  }
  return true;
}

}  // namespace

int main() {
  const auto nvml = stasis::DiscoverGpusWithNvml();
  const auto proc = stasis::DiscoverGpusFromProc("/proc/driver/nvidia");
  stasis::GpuDiscoverySources only_smi;
  only_smi.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  only_smi.proc_dir = "/nonexistent/proc";
  const auto smi = stasis::DiscoverGpus(only_smi);
  std::printf("%s\n%s\n%s\n", Line("nvml", nvml).c_str(), Line("procfs", proc).c_str(), Line("nvidia-smi", smi).c_str());
  const bool agree = Agrees(nvml, proc) && Agrees(nvml, smi) && Agrees(proc, smi);
  std::printf("agree=%s\n", agree ? "true" : "false");
  return agree && nvml.ok() ? 0 : 1;
}
