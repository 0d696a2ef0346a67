// The only code that knows QEMU's command line: the argv that starts one sandbox's micro-VM
// from a validated bundle.
// Invariants: every path in it comes from the validated bundle or the sandbox's own root;
// values inside QEMU option lists are escaped (',' → ",,"); the QMP socket and the pidfile
// are relative to the root (QEMU's cwd), which keeps the socket path short.
#pragma once

#include <string>
#include <vector>

#include "runtimes/microvm_bundle.h"
#include "runtimes/runtime_driver.h"

namespace stasis::qemu {

struct QemuLaunch {
  std::string qemu;        // the binary
  std::string accel;       // "kvm" | "tcg"
  std::string log_path;    // where the serial console is appended
  bool incoming = false;   // start with -incoming defer (a restore)
};

std::vector<std::string> QemuArgv(const QemuLaunch& launch, const SandboxRef& ref,
                                  const MicrovmBundle& bundle);

}  // namespace stasis::qemu
