// The commands of stasis-cuda-checkpoint over the driver's cuCheckpointProcess* calls.
#include "commands.h"

#include <stdio.h>
#include <string.h>

#include "fastsnap_client.h"
#include "report.h"

static const char* StateName(CUprocessState state) {
  switch (state) {
    case CU_PROCESS_STATE_RUNNING:
      return "running";
    case CU_PROCESS_STATE_LOCKED:
      return "locked";
    case CU_PROCESS_STATE_CHECKPOINTED:
      return "checkpointed";
    case CU_PROCESS_STATE_FAILED:
      return "failed";
    default:
      return NULL;
  }
}

// Every struct is zeroed: reserved fields must be zero, and a zeroed restore struct means
// "the same GPUs" (no remap).
static CUresult Lock(const CudaDriver* d, int pid, unsigned int timeout_ms) {
  CUcheckpointLockArgs args;
  memset(&args, 0, sizeof args);
  args.timeoutMs = timeout_ms;
  return d->cuCheckpointProcessLock(pid, &args);
}

static CUresult Checkpoint(const CudaDriver* d, int pid) {
  CUcheckpointCheckpointArgs args;
  memset(&args, 0, sizeof args);
  return d->cuCheckpointProcessCheckpoint(pid, &args);
}

static CUresult Restore(const CudaDriver* d, int pid, const GpuPair* map, unsigned int map_count) {
  CUcheckpointRestoreArgs args;
  memset(&args, 0, sizeof args);
  CUcheckpointGpuPair pairs[kMaxGpuPairs];
  for (unsigned int i = 0; i < map_count; i++) {
    memcpy(pairs[i].oldUuid, map[i].old_uuid, sizeof pairs[i].oldUuid);
    memcpy(pairs[i].newUuid, map[i].new_uuid, sizeof pairs[i].newUuid);
  }
  if (map_count > 0) {
    args.gpuPairs = pairs;
    args.gpuPairsCount = map_count;
  }
  return d->cuCheckpointProcessRestore(pid, &args);
}

static CUresult Unlock(const CudaDriver* d, int pid) {
  CUcheckpointUnlockArgs args;
  memset(&args, 0, sizeof args);
  return d->cuCheckpointProcessUnlock(pid, &args);
}

// "could not <verb> process ID <pid>: "<driver text>" (CUresult N)": the shape integrators
// already match on NVIDIA's messages, plus the number, which does not change between drivers.
static int CallFailed(const CudaDriver* d, const char* verb, int pid, CUresult result) {
  return ReportError(kExitCudaError, "could not %s process ID %d: \"%s\" (CUresult %d)", verb, pid,
                     CudaErrorText(d, result), result);
}

static int ReportLockFailure(const CudaDriver* d, int pid, unsigned int timeout_ms,
                             CUresult result) {
  if (result == CUDA_ERROR_NOT_READY) {
    // The driver documents that a timed-out lock leaves the process RUNNING: the caller can
    // retry later without cleaning up.
    return ReportError(kExitLockTimeout,
                       "lock of process ID %d timed out after %u ms waiting for its GPU work; "
                       "the process is still running",
                       pid, timeout_ms);
  }
  return CallFailed(d, "lock", pid, result);
}

static int LockOrReport(const CudaDriver* d, int pid, unsigned int timeout_ms) {
  CUresult result = Lock(d, pid, timeout_ms);
  return result == CUDA_SUCCESS ? kExitOk : ReportLockFailure(d, pid, timeout_ms, result);
}

static int GetState(const CudaDriver* d, int pid, CUprocessState* state) {
  CUresult result = d->cuCheckpointProcessGetState(pid, state);
  if (result != CUDA_SUCCESS) return CallFailed(d, "get the CUDA state of", pid, result);
  if (StateName(*state) == NULL) {
    return ReportError(kExitCudaError, "process ID %d is in an unknown CUDA state %d", pid, *state);
  }
  return kExitOk;
}

// After a failed lock or checkpoint of a staged process: the memory goes back only into a
// running process (a locked one's CUDA calls, the library's included, would wait for an unlock).
static void UnstageIfRunning(const CudaDriver* d, int pid, unsigned int timeout_ms) {
  CUprocessState state = CU_PROCESS_STATE_FAILED;
  if (d->cuCheckpointProcessGetState(pid, &state) == CUDA_SUCCESS &&
      state == CU_PROCESS_STATE_RUNNING) {
    FastsnapUnstageAfterFailure(pid, timeout_ms);
  } else {
    fprintf(stderr, "fast-snapshot: the staged device memory stays staged: the process is %s\n",
            StateName(state) != NULL ? StateName(state) : "in an unknown state");
  }
}

static int ToggleToCheckpointed(const CudaDriver* d, const Args* a) {
  const int pid = a->pid;
  const int staged = FastsnapStage(pid, a->fast_snapshot_timeout_ms);
  CUresult result = Lock(d, pid, a->timeout_ms);
  if (result != CUDA_SUCCESS) {
    if (staged) UnstageIfRunning(d, pid, a->fast_snapshot_timeout_ms);
    return ReportLockFailure(d, pid, a->timeout_ms, result);
  }
  result = Checkpoint(d, pid);
  if (result == CUDA_SUCCESS) return kExitOk;

  // Undo our lock so the process runs on; if that is impossible, say where it was left.
  CUprocessState state = CU_PROCESS_STATE_FAILED;
  int unlocked = d->cuCheckpointProcessGetState(pid, &state) == CUDA_SUCCESS &&
                 state == CU_PROCESS_STATE_LOCKED && Unlock(d, pid) == CUDA_SUCCESS;
  if (staged) UnstageIfRunning(d, pid, a->fast_snapshot_timeout_ms);
  const char* where = unlocked                   ? "unlocked it again, the process is running"
                      : StateName(state) != NULL ? StateName(state)
                                                 : "in an unknown state";
  return ReportError(
      kExitCudaError, "could not checkpoint process ID %d: \"%s\" (CUresult %d); %s%s", pid,
      CudaErrorText(d, result), result, unlocked ? "" : "the process is left ", where);
}

static int ToggleToRunning(const CudaDriver* d, const Args* a) {
  const int pid = a->pid;
  CUresult result = Restore(d, pid, a->device_map, a->device_map_count);
  if (result != CUDA_SUCCESS) return CallFailed(d, "restore", pid, result);
  result = Unlock(d, pid);
  if (result != CUDA_SUCCESS) {
    return ReportError(kExitCudaError,
                       "restored process ID %d but could not unlock it: \"%s\" (CUresult %d); "
                       "the process is left locked",
                       pid, CudaErrorText(d, result), result);
  }
  return FastsnapUnstage(pid, a->fast_snapshot_timeout_ms);
}

static int Toggle(const CudaDriver* d, const Args* a) {
  const int pid = a->pid;
  CUprocessState state;
  int status = GetState(d, pid, &state);
  if (status != kExitOk) return status;
  switch (state) {
    case CU_PROCESS_STATE_RUNNING:
      // NVIDIA's tool ignores a map it cannot use; a caller that passed one expects a restore.
      if (a->device_map_count > 0) {
        return ReportError(kExitUsage, "process ID %d is running: --device-map applies to a restore", pid);
      }
      return ToggleToCheckpointed(d, a);
    case CU_PROCESS_STATE_CHECKPOINTED:
      return ToggleToRunning(d, a);
    case CU_PROCESS_STATE_LOCKED:
      // Someone else is mid-way through a sequence; guessing its direction could undo it.
      return ReportError(kExitCudaError,
                         "process ID %d is locked (neither running nor checkpointed); finish "
                         "with --action checkpoint or --action unlock",
                         pid);
    default:
      return ReportError(kExitCudaError,
                         "process ID %d is in the failed CUDA state and cannot be toggled", pid);
  }
}

int RunCheckpointCommand(const CudaDriver* d, const Args* args) {
  int pid = args->pid;
  CUresult result;
  switch (args->command) {
    case kCommandGetState: {
      CUprocessState state;
      int status = GetState(d, pid, &state);
      if (status == kExitOk) printf("%s\n", StateName(state));
      return status;
    }
    case kCommandToggle:
      return Toggle(d, args);
    case kCommandLock:
      return LockOrReport(d, pid, args->timeout_ms);
    case kCommandCheckpoint:
      result = Checkpoint(d, pid);
      return result == CUDA_SUCCESS ? kExitOk : CallFailed(d, "checkpoint", pid, result);
    case kCommandRestore:
      result = Restore(d, pid, args->device_map, args->device_map_count);
      return result == CUDA_SUCCESS ? kExitOk : CallFailed(d, "restore", pid, result);
    case kCommandUnlock:
      result = Unlock(d, pid);
      return result == CUDA_SUCCESS ? kExitOk : CallFailed(d, "unlock", pid, result);
    case kCommandGetRestoreTid: {
      int tid = 0;
      result = d->cuCheckpointProcessGetRestoreThreadId(pid, &tid);
      if (result != CUDA_SUCCESS) return CallFailed(d, "get the restore thread of", pid, result);
      printf("%d\n", tid);
      return kExitOk;
    }
    default:
      return ReportError(kExitUsage, "internal error: unhandled command %d", (int)args->command);
  }
}
