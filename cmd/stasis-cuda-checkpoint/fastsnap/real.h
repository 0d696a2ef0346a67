// The real driver behind the interposed names: glibc's own dlsym, and the entry points of
// libcuda.so.1 that the library itself calls (the allocator, stage and unstage). These never
// pass through the library's wrappers, so the control thread is never held by its own gate.
//
// Invariant: RealDriverGet returns a table with every pointer set, or NULL after logging why
// (then the library passes calls through and never tracks memory).
#pragma once

#include "cuda_types.h"

typedef struct {
  CUresult (*cuCtxGetCurrent)(CUcontext* ctx);
  CUresult (*cuCtxSetCurrent)(CUcontext ctx);
  CUresult (*cuCtxGetDevice)(CUdevice* device);
  CUresult (*cuCtxSynchronize)(void);
  CUresult (*cuMemGetAllocationGranularity)(size_t* granularity, const CUmemAllocationProp* prop,
                                            int option);
  CUresult (*cuMemAddressReserve)(CUdeviceptr* ptr, size_t size, size_t alignment,
                                  CUdeviceptr addr, unsigned long long flags);
  CUresult (*cuMemAddressFree)(CUdeviceptr ptr, size_t size);
  CUresult (*cuMemCreate)(CUmemGenericAllocationHandle* handle, size_t size,
                          const CUmemAllocationProp* prop, unsigned long long flags);
  CUresult (*cuMemRelease)(CUmemGenericAllocationHandle handle);
  CUresult (*cuMemMap)(CUdeviceptr ptr, size_t size, size_t offset,
                       CUmemGenericAllocationHandle handle, unsigned long long flags);
  CUresult (*cuMemUnmap)(CUdeviceptr ptr, size_t size);
  CUresult (*cuMemSetAccess)(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                             size_t count);
  CUresult (*cuMemAlloc_v2)(CUdeviceptr* ptr, size_t size);
  CUresult (*cuMemFree_v2)(CUdeviceptr ptr);
  CUresult (*cuMemHostAlloc)(void** ptr, size_t size, unsigned int flags);
  CUresult (*cuMemFreeHost)(void* ptr);
  CUresult (*cuMemcpyDtoHAsync_v2)(void* dst, CUdeviceptr src, size_t size, CUstream stream);
  CUresult (*cuMemcpyHtoDAsync_v2)(CUdeviceptr dst, const void* src, size_t size,
                                   CUstream stream);
  CUresult (*cuStreamCreate)(CUstream* stream, unsigned int flags);
  CUresult (*cuStreamSynchronize)(CUstream stream);
} RealDriver;

// Loads libcuda.so.1 (already loaded in any process that reaches a wrapper) once.
const RealDriver* RealDriverGet(void);

// The driver's own definition of `name`, or NULL (looked up with glibc's dlsym, never ours).
void* RealSymbol(const char* name);

// glibc's dlsym, found with dlvsym(RTLD_NEXT) under the versions glibc has exported it as.
void* RealDlsym(void* handle, const char* name);

// What dlsym(RTLD_NEXT, name) would have returned to code in the object that contains
// `caller`: the first definition in an object loaded after that one. glibc resolves RTLD_NEXT
// relative to its own caller, which once dlsym is interposed is this library, not the program.
void* RealDlsymNext(const void* caller, const char* name);

// Prints "libstasis-fastsnap: <text>" on stderr; the workload's own log is the only place a
// preloaded library can say anything.
void FastsnapLog(const char* format, ...) __attribute__((format(printf, 1, 2)));

// RealSymbol(name), looked up once into `*slot` (a wrapper's own static).
void* RealCached(void** slot, const char* name);
