// A micro-VM bundle: what a `runtime: microvm` actor's spec.bundle names instead of an OCI
// bundle. A directory holding microvm.json and the files it names:
//   {"kernel": "vmlinuz", "initramfs": "initramfs.gz", "memoryMiB": 256, "vcpus": 1,
//    "cmdline": "console=ttyS0 panic=-1"}
// kernel and initramfs are relative paths confined under the bundle directory (symlinks
// resolved: a link out of it is refused); the guest's serial console (ttyS0) is the actor's log.
// Every field is checked here, since the bundle is user input that reaches QEMU's argv.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace stasis {

inline constexpr int64_t kMicrovmMinMemoryMiB = 64;
inline constexpr int64_t kMicrovmMaxMemoryMiB = 64 * 1024;
inline constexpr int64_t kMicrovmMaxVcpus = 32;
inline constexpr size_t kMicrovmMaxCmdline = 2048;

struct MicrovmBundle {
  std::string dir;        // the bundle directory, canonical
  std::string kernel;     // canonical path under dir
  std::string initramfs;  // canonical path under dir; empty when the bundle has none
  int64_t memory_mib = 256;
  int64_t vcpus = 1;
  std::string cmdline = "console=ttyS0 panic=-1";
};

// Reads and validates <dir>/microvm.json: kInvalidArgument with reason "bad_bundle" and a
// message naming the field otherwise.
Result<MicrovmBundle> LoadMicrovmBundle(const std::string& dir);

}  // namespace stasis
