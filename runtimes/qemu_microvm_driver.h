// A RuntimeDriver for micro-VM actors: QEMU's `microvm` machine booting a bundle's kernel and
// initramfs (microvm_bundle.h), driven over QMP (qemu_qmp.h); QEMU's argv is built in
// qemu_argv.h, the process lifecycle is qemu_microvm_driver.cc, snapshots qemu_snapshot.cc.
// docs/microvm.md describes the design; the GPU story is there too (this driver refuses
// nothing itself: the reconciler refuses GPU micro-VM actors).
//
// A sandbox is one daemonized QEMU (its own session, so it outlives an agent restart) whose
// files live in ref.root:
//   vm.json    {"id", "bundle"}: the sandbox exists while this exists (List, State)
//   qemu.pid   QEMU's pidfile; the process is checked to be this sandbox's QEMU (its argv
//              carries `-name <id>`) before it is signalled, so a reused pid is never killed
//   qmp.sock   the QMP socket
//   qemu.log   QEMU's own stderr (start-up errors)
// The guest's serial console is appended to ref.log_path (the actor's log).
//
// Snapshots: pause and suspend are `stop` + `migrate` to a file descriptor passed over QMP (no
// shell, no path in QEMU's hands) + `quit`; restore starts QEMU with `-incoming defer` and the
// same bundle, passes the image the same way (`migrate-incoming`), then `cont`. An image
// directory holds vm.state (the migration stream) and vm.json (the VM's shape and the QEMU
// version, checked before a restore is tried).
//
// Failure classes are those of runtime_driver.h: a QEMU that dies (or is killed) under a
// checkpoint is "container_stopped"; an image from another QEMU version is "version_mismatch";
// a bundle or image whose shape does not match is "bad_bundle".
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtimes/runtime_driver.h"

namespace stasis {

struct QemuMicrovmOptions {
  std::string qemu = "qemu-system-x86_64";
  // "kvm" (production) or "tcg" (software emulation: machines without a usable /dev/kvm).
  std::string accel = "kvm";
  std::chrono::milliseconds query{std::chrono::seconds(30)};   // state, version, QMP answers
  std::chrono::milliseconds remove{std::chrono::seconds(60)};  // SIGKILL until the process is gone
  // How often a running migration is polled (query-migrate).
  std::chrono::milliseconds migrate_poll{std::chrono::milliseconds(50)};
};

class QemuMicrovmDriver : public RuntimeDriver {
 public:
  explicit QemuMicrovmDriver(QemuMicrovmOptions options = {});

  Status Run(const SandboxRef& ref, std::chrono::milliseconds deadline) override;
  Result<SandboxState> State(const SandboxRef& ref) override;
  Status Checkpoint(const SandboxRef& ref, const CheckpointOptions& options) override;
  Status Restore(const SandboxRef& ref, const RestoreOptions& options) override;
  // QMP `stop` / `cont`: the vCPUs halt, so the guest's files stop changing.
  Status Freeze(const SandboxRef& ref) override;
  Status Thaw(const SandboxRef& ref) override;
  Status Delete(const SandboxRef& ref) override;
  Result<std::vector<std::string>> List(const std::string& root) override;
  // "qemu-7.2.22", cached after the first success.
  Result<std::string> Version() override;
  // No CudaCheckpoint(): a VM's CUDA state would need a guest agent (docs/microvm.md).

  // The pid of ref's live QEMU, or 0 (tests kill it to simulate a crash).
  long QemuPid(const SandboxRef& ref) const;
  const QemuMicrovmOptions& options() const { return options_; }

 private:
  // One QMP command without arguments, for Freeze and Thaw.
  Status Simple(const char* op, const char* command, const SandboxRef& ref);
  // Starts QEMU for ref (with -incoming defer when `incoming`) and waits for QMP to answer.
  // *created says whether the sandbox's files were written (what a failure must remove).
  Status Launch(const char* op, const SandboxRef& ref, bool incoming,
                std::chrono::milliseconds deadline, bool* created);
  // SIGKILLs ref's QEMU, waits until it is gone, then removes the sandbox's files: afterwards
  // it does not exist.
  Status Remove(const SandboxRef& ref);
  // Whether the image in `image_dir` can be restored into ref's bundle by this QEMU (its
  // files, shape and QEMU version).
  Status CheckRestorable(const SandboxRef& ref, const std::string& image_dir);

  QemuMicrovmOptions options_;
  std::mutex cache_mu_;
  std::optional<std::string> version_;
};

}  // namespace stasis
