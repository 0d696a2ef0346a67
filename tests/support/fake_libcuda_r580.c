// TEST STAND-IN, NOT A DRIVER. Built by the tests as libcuda.so.1 in its own directory
// (build/tests/fake-libcuda-r580/) to exercise stasis-cuda-checkpoint's command-line logic
// only: which driver calls each command makes, in what order, with which arguments, and how
// each error is reported. It reports driver API 13000 (R580) and implements the checkpoint
// state machine of reference/cuda-checkpoint.md §3 in memory, for one process's lifetime. It
// never touches a GPU; the real behaviour is proven on a GPU by hack/gpu-helper-proof.sh.
//
// Controlled by environment variables (read by this stand-in, never by the helper):
//   FAKE_LIBCUDA_STATE  initial state of every pid: running|locked|checkpointed|failed
//                       (default running)
//   FAKE_LIBCUDA_FAIL   "<call>=<CUresult>": that call returns the code and changes nothing;
//                       <call> is one of init, get_state, lock, checkpoint, restore, unlock,
//                       get_restore_tid
//   FAKE_LIBCUDA_LOG    file to which each call appends one line, e.g. "lock pid=42
//                       timeout_ms=30000", "restore pid=42 device_map=GPU-…=GPU-…"
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUprocessState;
typedef struct {
  unsigned int timeoutMs;
  unsigned int reserved0;
  unsigned long long reserved1[7];
} CUcheckpointLockArgs;

enum { kRunning = 0, kLocked = 1, kCheckpointed = 2, kFailed = 3 };
enum { kIllegalState = 401 };

static int state = -1;

static void Log(const char* format, int pid, unsigned int extra) {
  const char* path = getenv("FAKE_LIBCUDA_LOG");
  if (path == NULL) return;
  FILE* f = fopen(path, "a");
  if (f == NULL) return;
  fprintf(f, format, pid, extra);
  fputc('\n', f);
  fclose(f);
}

// The code FAKE_LIBCUDA_FAIL assigns to `call`, or 0.
static CUresult Injected(const char* call) {
  const char* spec = getenv("FAKE_LIBCUDA_FAIL");
  size_t n = strlen(call);
  if (spec == NULL || strncmp(spec, call, n) != 0 || spec[n] != '=') return 0;
  return atoi(spec + n + 1);
}

static int State(void) {
  if (state < 0) {
    const char* initial = getenv("FAKE_LIBCUDA_STATE");
    state = initial == NULL                        ? kRunning
            : strcmp(initial, "locked") == 0       ? kLocked
            : strcmp(initial, "checkpointed") == 0 ? kCheckpointed
            : strcmp(initial, "failed") == 0       ? kFailed
                                                   : kRunning;
  }
  return state;
}

// One legal transition, or 401 as the real driver answers an illegal one.
static CUresult Transition(const char* call, int from, int to) {
  CUresult injected = Injected(call);
  if (injected != 0) return injected;
  if (State() != from) return kIllegalState;
  state = to;
  return 0;
}

CUresult cuDriverGetVersion(int* version) {
  *version = 13000;  // CUDA 13.0, the driver API version R580 reports
  return 0;
}

CUresult cuInit(unsigned int flags) {
  Log("init pid=%d flags=%u", 0, flags);
  return Injected("init");
}

CUresult cuGetErrorString(CUresult error, const char** text) {
  switch (error) {  // the driver's texts (reference/cuda-checkpoint.md §4; 401 as R580 words it)
    case 0:
      *text = "no error";
      return 0;
    case 1:
      *text = "invalid argument";
      return 0;
    case 2:
      *text = "out of memory";
      return 0;
    case 3:
      *text = "initialization error";
      return 0;
    case 100:
      *text = "no CUDA-capable device is detected";
      return 0;
    case 304:
      *text = "OS call failed or operation not supported on this OS";
      return 0;
    case 401:
      *text = "the operation cannot be performed in the present state";
      return 0;
    case 600:
      *text = "device not ready";
      return 0;
    case 800:
      *text = "operation not permitted";
      return 0;
    default:
      *text = NULL;
      return 1;  // CUDA_ERROR_INVALID_VALUE, as for an unknown code
  }
}

CUresult cuCheckpointProcessGetState(int pid, CUprocessState* out) {
  Log("get_state pid=%d", pid, 0);
  CUresult injected = Injected("get_state");
  if (injected != 0) return injected;
  *out = State();
  return 0;
}

CUresult cuCheckpointProcessLock(int pid, CUcheckpointLockArgs* args) {
  Log("lock pid=%d timeout_ms=%u", pid, args != NULL ? args->timeoutMs : 0);
  return Transition("lock", kRunning, kLocked);
}

CUresult cuCheckpointProcessCheckpoint(int pid, void* args) {
  (void)args;
  Log("checkpoint pid=%d", pid, 0);
  return Transition("checkpoint", kLocked, kCheckpointed);
}

// The driver's CUcheckpointRestoreArgs (reference/cuda-checkpoint.md §2): R580's GPU remap.
typedef struct {
  unsigned char oldUuid[16];
  unsigned char newUuid[16];
} CUcheckpointGpuPair;
typedef struct {
  CUcheckpointGpuPair* gpuPairs;
  unsigned int gpuPairsCount;
  char reserved[52 - sizeof(void*)];
  unsigned long long reserved1;
} CUcheckpointRestoreArgs;

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi prints a UUID.
static void FormatUuid(const unsigned char* u, char out[41]) {
  snprintf(out, 41, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2],
           u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

// Logged as "restore pid=N", with " device_map=OLD=NEW,…" when the call remaps GPUs.
CUresult cuCheckpointProcessRestore(int pid, CUcheckpointRestoreArgs* args) {
  const char* path = getenv("FAKE_LIBCUDA_LOG");
  FILE* f = path != NULL ? fopen(path, "a") : NULL;
  if (f != NULL) {
    fprintf(f, "restore pid=%d", pid);
    for (unsigned int i = 0; args != NULL && args->gpuPairs != NULL && i < args->gpuPairsCount; i++) {
      char old_uuid[41], new_uuid[41];
      FormatUuid(args->gpuPairs[i].oldUuid, old_uuid);
      FormatUuid(args->gpuPairs[i].newUuid, new_uuid);
      fprintf(f, "%s%s=%s", i == 0 ? " device_map=" : ",", old_uuid, new_uuid);
    }
    fputc('\n', f);
    fclose(f);
  }
  return Transition("restore", kCheckpointed, kLocked);
}

CUresult cuCheckpointProcessUnlock(int pid, void* args) {
  (void)args;
  Log("unlock pid=%d", pid, 0);
  return Transition("unlock", kLocked, kRunning);
}

CUresult cuCheckpointProcessGetRestoreThreadId(int pid, int* tid) {
  Log("get_restore_tid pid=%d", pid, 0);
  CUresult injected = Injected("get_restore_tid");
  if (injected != 0) return injected;
  *tid = pid + 7;  // any value the test can predict
  return 0;
}
