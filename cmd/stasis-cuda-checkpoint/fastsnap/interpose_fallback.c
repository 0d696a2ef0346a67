// Allocation kinds and sharing the fast path does not handle. Each call marks the process
// "unsupported: <reason>" (its next stage answers "fallback <reason>", so the driver's own
// checkpoint moves everything) and then runs the driver's function unchanged. They pass the
// gate too: several allocate or map device memory, which must not happen mid-stage.
//
// Not listed: cuStreamBeginCaptureToGraph and the other capture calls allocate nothing
// themselves; memory a captured stream allocates goes through cuMemAllocAsync, listed here.
#define _GNU_SOURCE

#include "gate.h"
#include "interpose.h"
#include "registry.h"

#define FALLBACK_LIST(X)                                                                         \
  X(cuMemAllocManaged, "managed memory (cuMemAllocManaged)",                                     \
    (CUdeviceptr * p, size_t n, unsigned f), (p, n, f))                                          \
  X(cuMemAllocAsync, "stream-ordered allocation (cuMemAllocAsync)",                              \
    (CUdeviceptr * p, size_t n, CUstream st), (p, n, st))                                        \
  X(cuMemAllocAsync_ptsz, "stream-ordered allocation (cuMemAllocAsync)",                         \
    (CUdeviceptr * p, size_t n, CUstream st), (p, n, st))                                        \
  X(cuMemAllocFromPoolAsync, "memory pool allocation (cuMemAllocFromPoolAsync)",                 \
    (CUdeviceptr * p, size_t n, CUmemoryPool pool, CUstream st), (p, n, pool, st))               \
  X(cuMemAllocFromPoolAsync_ptsz, "memory pool allocation (cuMemAllocFromPoolAsync)",            \
    (CUdeviceptr * p, size_t n, CUmemoryPool pool, CUstream st), (p, n, pool, st))               \
  X(cuMemPoolCreate, "memory pool (cuMemPoolCreate)", (CUmemoryPool * pool, const void* props),  \
    (pool, props))                                                                               \
  X(cuMemAllocPitch_v2, "pitched allocation (cuMemAllocPitch)",                                  \
    (CUdeviceptr * p, size_t* pitch, size_t w, size_t h, unsigned e), (p, pitch, w, h, e))       \
  X(cuIpcGetMemHandle, "CUDA IPC export (cuIpcGetMemHandle)", (CUipcMemHandle * h, CUdeviceptr p), \
    (h, p))                                                                                      \
  X(cuIpcOpenMemHandle, "CUDA IPC import (cuIpcOpenMemHandle)",                                  \
    (CUdeviceptr * p, CUipcMemHandle h, unsigned f), (p, h, f))                                  \
  X(cuIpcOpenMemHandle_v2, "CUDA IPC import (cuIpcOpenMemHandle)",                               \
    (CUdeviceptr * p, CUipcMemHandle h, unsigned f), (p, h, f))                                  \
  X(cuMemExportToShareableHandle, "shared VMM memory (cuMemExportToShareableHandle)",            \
    (void* out, CUmemGenericAllocationHandle h, int t, unsigned long long f), (out, h, t, f))    \
  X(cuMemImportFromShareableHandle, "shared VMM memory (cuMemImportFromShareableHandle)",        \
    (CUmemGenericAllocationHandle * h, void* os, int t), (h, os, t))                             \
  X(cuMulticastCreate, "multicast memory (cuMulticastCreate)",                                   \
    (CUmemGenericAllocationHandle * h, const void* prop), (h, prop))                             \
  X(cuGraphAddMemAllocNode, "graph memory allocation (cuGraphAddMemAllocNode)",                  \
    (CUgraphNode * n, CUgraph g, const CUgraphNode* deps, size_t nd, void* p), (n, g, deps, nd, p))

#define DEFINE_FALLBACK(name, reason, params, args) \
  FASTSNAP_EXPORT CUresult name params {             \
    REAL_FN(real, #name, params);                    \
    if (real == NULL) return CUDA_ERROR_NOT_FOUND;   \
    GateEnter();                                     \
    RegistryMarkUnsupported("%s", reason);           \
    CUresult result = real args;                     \
    GateLeave();                                     \
    return result;                                   \
  }

FALLBACK_LIST(DEFINE_FALLBACK)

#define EXPORT_ENTRY(name, reason, params, args) {#name, (void*)name},

static const Export kFallback[] = {FALLBACK_LIST(EXPORT_ENTRY)};

const Export* FallbackExports(size_t* count) {
  *count = sizeof kFallback / sizeof kFallback[0];
  return kFallback;
}
