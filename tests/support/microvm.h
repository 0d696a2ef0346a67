// Micro-VM tests' guest and QEMU settings: the bundle hack/make-microvm-bundle.sh builds from
// Debian packages (a cloud kernel and a busybox initramfs printing "booted" once, then
// "count N" twice a second on the serial console), and the accelerator to run it with.
#pragma once

#include <string>

namespace stasis::testing {

// The cached bundle directory (or $STASIS_MICROVM_BUNDLE). Aborts when it cannot be had: a test
// that needs a VM must not silently pass without one.
const std::string& MicrovmTestBundle();

// $STASIS_MICROVM_ACCEL, else "tcg": on the machines this project's CI runs on /dev/kvm exists
// but cannot run a guest (docs/microvm.md), so the tests use QEMU's software emulation.
std::string MicrovmTestAccel();

// The last "count N" on a console log, or -1; and how many times the guest booted.
long LastCount(const std::string& console_log);
int BootCount(const std::string& console_log);

}  // namespace stasis::testing
