// The slice of the CUDA driver API that stasis-cuda-checkpoint calls, declared here so that
// nothing from the CUDA toolkit is needed at build time, and the loader that resolves it
// from libcuda.so.1 at run time.
//
// Invariant: a CudaDriver that CudaDriverLoad accepted has every function pointer set, reports
// a driver at least kMinDriverApiVersion (R570), and has had cuInit(0) called once.
// Layouts follow cuda.h of CUDA 12.8/13.0 (group CUDA_CHECKPOINT); cuda_driver.c asserts them.
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;  // an enum in cuda.h; int-sized on every ABI the driver ships for
enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_ILLEGAL_STATE = 401,
  CUDA_ERROR_NOT_READY = 600,  // what Lock returns when its timeout passes
};

typedef int CUprocessState;  // an int enum in cuda.h
enum {
  CU_PROCESS_STATE_RUNNING = 0,
  CU_PROCESS_STATE_LOCKED = 1,
  CU_PROCESS_STATE_CHECKPOINTED = 2,
  CU_PROCESS_STATE_FAILED = 3,
};

// Every argument struct is 64 bytes and every reserved field must be zero, so callers
// zero-initialise the whole struct.
typedef struct {
  unsigned int timeoutMs;  // 0 = wait forever; must be the first field (offset 0)
  unsigned int reserved0;
  uint64_t reserved1[7];
} CUcheckpointLockArgs;

typedef struct {
  uint64_t reserved[8];
} CUcheckpointCheckpointArgs;

typedef struct {
  char oldUuid[16];  // CUuuid
  char newUuid[16];
} CUcheckpointGpuPair;

typedef struct {
  CUcheckpointGpuPair* gpuPairs;  // R580+: remap GPUs on restore; NULL = same GPUs
  unsigned int gpuPairsCount;
  char reserved[52 - sizeof(CUcheckpointGpuPair*)];
  uint64_t reserved1;
} CUcheckpointRestoreArgs;

typedef struct {
  uint64_t reserved[8];
} CUcheckpointUnlockArgs;

// cuDriverGetVersion reports 1000 * major + 10 * minor of the newest CUDA the driver supports.
// The checkpoint API (lock/checkpoint/restore/unlock) arrived with CUDA 12.8, i.e. driver R570.
enum { kMinDriverApiVersion = 12080 };

typedef struct {
  void* library;  // the dlopen handle, kept open for the life of the process
  int api_version;
  CUresult (*cuInit)(unsigned int flags);
  CUresult (*cuDriverGetVersion)(int* version);
  CUresult (*cuGetErrorString)(CUresult error, const char** text);
  CUresult (*cuCheckpointProcessGetState)(int pid, CUprocessState* state);
  CUresult (*cuCheckpointProcessLock)(int pid, CUcheckpointLockArgs* args);
  CUresult (*cuCheckpointProcessCheckpoint)(int pid, CUcheckpointCheckpointArgs* args);
  CUresult (*cuCheckpointProcessRestore)(int pid, CUcheckpointRestoreArgs* args);
  CUresult (*cuCheckpointProcessUnlock)(int pid, CUcheckpointUnlockArgs* args);
  CUresult (*cuCheckpointProcessGetRestoreThreadId)(int pid, int* tid);
} CudaDriver;

typedef enum {
  kDriverLoaded = 0,
  kDriverMissing,     // libcuda.so.1 could not be loaded, or is not a CUDA driver
  kDriverTooOld,      // older than R570, or lacks the checkpoint entry points
  kDriverInitFailed,  // cuInit(0) failed
} DriverLoadStatus;

// Loads libcuda.so.1 (found the way the dynamic loader finds any library: LD_LIBRARY_PATH,
// then the ld.so cache), checks its version, resolves the entry points and calls cuInit(0).
// On failure writes a one-line reason (no trailing newline) into `why`.
DriverLoadStatus CudaDriverLoad(CudaDriver* driver, char* why, size_t why_size);

// The driver's text for `error` ("invalid argument"), or "unknown error".
const char* CudaErrorText(const CudaDriver* driver, CUresult error);
