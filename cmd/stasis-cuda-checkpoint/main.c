// stasis-cuda-checkpoint: stasis's CLI-compatible replacement for NVIDIA's cuda-checkpoint,
// built on the public driver API (cuCheckpointProcess*) loaded from libcuda.so.1 at run time.
// runsc runs it inside GPU sandboxes as `--get-state --pid N` and `--toggle --pid N`
// (DESIGN.md §8); operators use --action and --get-restore-tid. No shell, no toolkit.
#define _POSIX_C_SOURCE 200809L

#include <signal.h>
#include <stdio.h>

#include "args.h"
#include "commands.h"
#include "cuda_driver.h"
#include "report.h"

// Killing the tool in the middle of a driver call can leave the target out of sync with the
// driver (NVIDIA, criu PR #2547). Hold off the polite termination signals for the whole run;
// the lock timeout bounds how long that is, and SIGKILL still works.
static void HoldOffTerminationSignals(void) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGQUIT);
  sigprocmask(SIG_BLOCK, &set, NULL);
}

static int MapLoadStatus(DriverLoadStatus status) {
  switch (status) {
    case kDriverMissing:
      return kExitNoDriver;
    case kDriverTooOld:
      return kExitOldDriver;
    default:
      return kExitCudaError;
  }
}

int main(int argc, char** argv) {
  Args args;
  char why[512];
  if (!ParseArgs(argc, argv, &args, why, sizeof why)) return ReportError(kExitUsage, "%s", why);
  if (args.command == kCommandHelp) {
    fputs(kHelpText, stdout);
    return kExitOk;
  }

  int changes_state = args.command != kCommandGetState && args.command != kCommandGetRestoreTid;
  if (changes_state) HoldOffTerminationSignals();

  CudaDriver driver;
  DriverLoadStatus loaded = CudaDriverLoad(&driver, why, sizeof why);
  if (loaded != kDriverLoaded) return ReportError(MapLoadStatus(loaded), "%s", why);
  // The library stays loaded until exit: unloading a driver is never worth the risk.
  return RunCheckpointCommand(&driver, &args);
}
