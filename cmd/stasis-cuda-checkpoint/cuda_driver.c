// Loads libcuda.so.1 with dlopen and resolves the checkpoint API by name: the toolkit is
// never linked, so one binary runs against whatever driver the container is given.
#define _POSIX_C_SOURCE 200809L

#include "cuda_driver.h"

#include <assert.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

// A wrong layout makes the driver read garbage (a public wrapper once put timeoutMs last, so
// every lock silently waited forever); check what cuda.h promises.
static_assert(sizeof(CUcheckpointLockArgs) == 64, "CUcheckpointLockArgs is 64 bytes");
static_assert(offsetof(CUcheckpointLockArgs, timeoutMs) == 0, "timeoutMs comes first");
static_assert(sizeof(CUcheckpointCheckpointArgs) == 64, "CUcheckpointCheckpointArgs is 64 bytes");
static_assert(sizeof(CUcheckpointGpuPair) == 32, "CUcheckpointGpuPair is 32 bytes");
static_assert(sizeof(CUcheckpointRestoreArgs) == 64, "CUcheckpointRestoreArgs is 64 bytes");
static_assert(offsetof(CUcheckpointRestoreArgs, gpuPairsCount) == sizeof(void*),
              "gpuPairsCount follows the pointer");
static_assert(offsetof(CUcheckpointRestoreArgs, reserved1) == 56, "reserved1 ends the struct");
static_assert(sizeof(CUcheckpointUnlockArgs) == 64, "CUcheckpointUnlockArgs is 64 bytes");

// dlsym returns void*; ISO C has no conversion to a function pointer, POSIX guarantees this one.
static int Resolve(void* library, const char* name, void* slot) {
  void* symbol = dlsym(library, name);
  if (symbol == NULL) return 0;
  memcpy(slot, &symbol, sizeof symbol);
  return 1;
}

DriverLoadStatus CudaDriverLoad(CudaDriver* driver, char* why, size_t why_size) {
  memset(driver, 0, sizeof *driver);
  // RTLD_LOCAL: the driver's symbols must not leak into anything else this process loads.
  driver->library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver->library == NULL) {
    const char* reason = dlerror();
    snprintf(why, why_size,
             "cannot load libcuda.so.1 (%s); the NVIDIA driver's libraries must be visible to "
             "this process (LD_LIBRARY_PATH or the ld.so cache)",
             reason != NULL ? reason : "unknown dlopen error");
    return kDriverMissing;
  }
  // Plain names: these three exist in every driver this helper can meet and have one ABI.
  if (!Resolve(driver->library, "cuDriverGetVersion", &driver->cuDriverGetVersion) ||
      !Resolve(driver->library, "cuInit", &driver->cuInit) ||
      !Resolve(driver->library, "cuGetErrorString", &driver->cuGetErrorString)) {
    snprintf(why, why_size,
             "libcuda.so.1 lacks cuDriverGetVersion, cuInit or cuGetErrorString; it is not an "
             "NVIDIA driver library");
    return kDriverMissing;
  }

  // Check the version before anything else, the way NVIDIA's tool does, so an old driver gets
  // one clear message instead of a missing-symbol error.
  int version = 0;
  CUresult result = driver->cuDriverGetVersion(&version);
  if (result != CUDA_SUCCESS) {
    snprintf(why, why_size, "insufficient driver: cuDriverGetVersion failed (CUresult %d)", result);
    return kDriverTooOld;
  }
  driver->api_version = version;
  if (version < kMinDriverApiVersion) {
    snprintf(why, why_size,
             "insufficient driver: libcuda.so.1 supports CUDA %d.%d (driver API version %d); "
             "the checkpoint API needs driver R570 or newer (CUDA 12.8, version %d)",
             version / 1000, (version % 1000) / 10, version, kMinDriverApiVersion);
    return kDriverTooOld;
  }

  // By name rather than through cuGetProcAddress: these six have exactly one ABI each (no
  // _v2 variants, no per-thread-stream forms), so dlsym yields the prototypes declared in
  // cuda_driver.h and nothing else can be meant.
  static const struct {
    const char* name;
    size_t offset;
  } kEntryPoints[] = {
      {"cuCheckpointProcessGetState", offsetof(CudaDriver, cuCheckpointProcessGetState)},
      {"cuCheckpointProcessLock", offsetof(CudaDriver, cuCheckpointProcessLock)},
      {"cuCheckpointProcessCheckpoint", offsetof(CudaDriver, cuCheckpointProcessCheckpoint)},
      {"cuCheckpointProcessRestore", offsetof(CudaDriver, cuCheckpointProcessRestore)},
      {"cuCheckpointProcessUnlock", offsetof(CudaDriver, cuCheckpointProcessUnlock)},
      {"cuCheckpointProcessGetRestoreThreadId",
       offsetof(CudaDriver, cuCheckpointProcessGetRestoreThreadId)},
  };
  for (size_t i = 0; i < sizeof kEntryPoints / sizeof kEntryPoints[0]; i++) {
    if (!Resolve(driver->library, kEntryPoints[i].name, (char*)driver + kEntryPoints[i].offset)) {
      snprintf(why, why_size,
               "insufficient driver: libcuda.so.1 (driver API version %d) lacks %s; the "
               "checkpoint API needs driver R570 or newer",
               version, kEntryPoints[i].name);
      return kDriverTooOld;
    }
  }

  // Once per process: Restore needs it unless persistence mode is on, and the other calls
  // need an initialised driver to reach the target.
  result = driver->cuInit(0);
  if (result != CUDA_SUCCESS) {
    snprintf(why, why_size, "error initializing CUDA: \"%s\" (CUresult %d)",
             CudaErrorText(driver, result), result);
    return kDriverInitFailed;
  }
  return kDriverLoaded;
}

const char* CudaErrorText(const CudaDriver* driver, CUresult error) {
  const char* text = NULL;
  if (driver->cuGetErrorString == NULL || driver->cuGetErrorString(error, &text) != CUDA_SUCCESS ||
      text == NULL) {
    return "unknown error";
  }
  return text;
}
