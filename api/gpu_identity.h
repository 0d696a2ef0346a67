// What a CUDA checkpoint depends on besides its own bytes: the GPU model it ran on and the
// driver that ran it. A Worker publishes its GPU's identity (spec.gpu), a snapshot records the
// identity it was taken on (status.latestSnapshot.gpu, and the manifest), and a snapshot with a
// CUDA context is only ever restored onto a GPU of the same identity.
//
// Why the rule is strict: cuda-checkpoint restores device memory onto the same chip type only
// (R580's device map renames GPUs of one model, it does not translate between models), and
// runsc's nvproxy selects its driver ABI by driver version, so a sandbox checkpointed under one
// driver is not known to restore under another. The CUDA driver API version follows the driver
// and is recorded for people, not compared.
#pragma once

#include <string>

namespace stasis::api {

struct GpuIdentity {
  std::string model;           // NVML's device name, e.g. "NVIDIA H200"
  std::string driver_version;  // e.g. "580.95.05"
  std::string cuda_version;    // the CUDA driver API version the driver supports, e.g. "13.0"
  bool Known() const { return !model.empty() && !driver_version.empty(); }
  bool operator==(const GpuIdentity&) const = default;
};

// "NVIDIA H200, driver 580.95.05" (the model and driver that are compared), for messages.
std::string Describe(const GpuIdentity& g);

// Empty when a snapshot taken on `taken_on` (with a CUDA context) can be restored on a GPU of
// identity `gpu`, else why not, for a condition's message. A snapshot whose identity was not
// recorded (taken before it was, or on a worker that published none) fits any GPU, as before.
std::string GpuMismatch(const GpuIdentity& taken_on, const GpuIdentity& gpu);

}  // namespace stasis::api
