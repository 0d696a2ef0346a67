#include "runtimes/qemu_argv.h"

#include "runtimes/qemu_sandbox.h"

namespace stasis::qemu {
namespace {

// A value inside a QEMU option list: a ',' is written ",,".
std::string QemuOptValue(const std::string& v) {
  std::string out;
  for (char ch : v) {
    out += ch;
    if (ch == ',') out += ',';
  }
  return out;
}

}  // namespace

std::vector<std::string> QemuArgv(const QemuLaunch& launch, const SandboxRef& ref,
                                  const MicrovmBundle& bundle) {
  // The serial chardev appends, so a restored VM's console continues the actor's log.
  // Option and value pairs, one per line.
  // clang-format off
  std::vector<std::string> argv = {
      launch.qemu,
      "-name", ref.id,
      "-machine", "microvm,acpi=off",
      "-accel", launch.accel,
      "-m", std::to_string(bundle.memory_mib),
      "-smp", std::to_string(bundle.vcpus),
      "-nodefaults", "-no-user-config", "-display", "none",
      "-kernel", bundle.kernel,
      "-append", bundle.cmdline,
      "-chardev", "file,id=console,append=on,path=" + QemuOptValue(launch.log_path),
      "-serial", "chardev:console",
      "-qmp", std::string("unix:") + kQmpSocket + ",server=on,wait=off",
      "-pidfile", kPidFile,
      "-no-reboot",
      "-daemonize",
  };
  // clang-format on
  if (!bundle.initramfs.empty()) {
    argv.push_back("-initrd");
    argv.push_back(bundle.initramfs);
  }
  if (launch.incoming) {
    argv.push_back("-incoming");
    argv.push_back("defer");
  }
  return argv;
}

}  // namespace stasis::qemu
