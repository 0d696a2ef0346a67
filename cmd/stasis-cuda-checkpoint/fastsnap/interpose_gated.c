// Every driver entry point that writes (or reads) device memory or launches work, wrapped in
// the quiesce gate: while a stage holds the gate, a workload thread calling one waits here
// instead of touching memory that is being copied out or is already released. Names and
// prototypes follow cuda.h of CUDA 12.x (the _v2 variants that CUdeviceptr_v2 brought, and
// the per-thread-default-stream _ptds/_ptsz variants that cuGetProcAddress hands out when
// asked with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM).
#define _GNU_SOURCE

#include "gate.h"
#include "interpose.h"

typedef const void* Desc;  // CUDA_MEMCPY2D*, CUDA_MEMCPY3D*, launch configs: passed through

#define DS(X, name, params, args) X(name, params, args) X(name##_ptds, params, args)
#define SZ(X, name, params, args) X(name, params, args) X(name##_ptsz, params, args)

#define GATED_LIST(X)                                                                          \
  DS(X, cuMemcpy, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n))                          \
  SZ(X, cuMemcpyAsync, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st), (d, s, n, st))    \
  DS(X, cuMemcpyPeer, (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n),     \
     (d, dc, s, sc, n))                                                                         \
  SZ(X, cuMemcpyPeerAsync,                                                                      \
     (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream st),         \
     (d, dc, s, sc, n, st))                                                                     \
  DS(X, cuMemcpyHtoD_v2, (CUdeviceptr d, const void* s, size_t n), (d, s, n))                   \
  SZ(X, cuMemcpyHtoDAsync_v2, (CUdeviceptr d, const void* s, size_t n, CUstream st),            \
     (d, s, n, st))                                                                             \
  DS(X, cuMemcpyDtoH_v2, (void* d, CUdeviceptr s, size_t n), (d, s, n))                         \
  SZ(X, cuMemcpyDtoHAsync_v2, (void* d, CUdeviceptr s, size_t n, CUstream st), (d, s, n, st))   \
  DS(X, cuMemcpyDtoD_v2, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n))                   \
  SZ(X, cuMemcpyDtoDAsync_v2, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st),            \
     (d, s, n, st))                                                                             \
  DS(X, cuMemcpyDtoA_v2, (CUarray d, size_t o, CUdeviceptr s, size_t n), (d, o, s, n))          \
  DS(X, cuMemcpyAtoD_v2, (CUdeviceptr d, CUarray s, size_t o, size_t n), (d, s, o, n))          \
  DS(X, cuMemcpyHtoA_v2, (CUarray d, size_t o, const void* s, size_t n), (d, o, s, n))          \
  SZ(X, cuMemcpyHtoAAsync_v2, (CUarray d, size_t o, const void* s, size_t n, CUstream st),      \
     (d, o, s, n, st))                                                                          \
  DS(X, cuMemcpyAtoH_v2, (void* d, CUarray s, size_t o, size_t n), (d, s, o, n))                \
  SZ(X, cuMemcpyAtoHAsync_v2, (void* d, CUarray s, size_t o, size_t n, CUstream st),            \
     (d, s, o, n, st))                                                                          \
  DS(X, cuMemcpyAtoA_v2, (CUarray d, size_t do_, CUarray s, size_t so, size_t n),               \
     (d, do_, s, so, n))                                                                        \
  DS(X, cuMemcpy2D_v2, (Desc p), (p))                                                           \
  DS(X, cuMemcpy2DUnaligned_v2, (Desc p), (p))                                                  \
  SZ(X, cuMemcpy2DAsync_v2, (Desc p, CUstream st), (p, st))                                     \
  DS(X, cuMemcpy3D_v2, (Desc p), (p))                                                           \
  SZ(X, cuMemcpy3DAsync_v2, (Desc p, CUstream st), (p, st))                                     \
  DS(X, cuMemcpy3DPeer, (Desc p), (p))                                                          \
  SZ(X, cuMemcpy3DPeerAsync, (Desc p, CUstream st), (p, st))                                    \
  SZ(X, cuMemcpyBatchAsync,                                                                     \
     (CUdeviceptr * d, CUdeviceptr * s, size_t * n, size_t c, void* at, size_t* ai, size_t na,  \
      size_t* fi, CUstream st),                                                                 \
     (d, s, n, c, at, ai, na, fi, st))                                                          \
  SZ(X, cuMemcpy3DBatchAsync,                                                                   \
     (size_t c, void* ops, size_t* fi, unsigned long long f, CUstream st), (c, ops, fi, f, st)) \
  /* CUDA 13.0's batches, without the failure index; cudart 13 asks for them at start. */      \
  SZ(X, cuMemcpyBatchAsync_v2,                                                                  \
     (CUdeviceptr * d, CUdeviceptr * s, size_t * n, size_t c, void* at, size_t* ai, size_t na,  \
      CUstream st),                                                                             \
     (d, s, n, c, at, ai, na, st))                                                              \
  SZ(X, cuMemcpy3DBatchAsync_v2, (size_t c, void* ops, unsigned long long f, CUstream st),      \
     (c, ops, f, st))                                                                           \
  DS(X, cuMemsetD8_v2, (CUdeviceptr d, unsigned char v, size_t n), (d, v, n))                   \
  DS(X, cuMemsetD16_v2, (CUdeviceptr d, unsigned short v, size_t n), (d, v, n))                 \
  DS(X, cuMemsetD32_v2, (CUdeviceptr d, unsigned int v, size_t n), (d, v, n))                   \
  DS(X, cuMemsetD2D8_v2, (CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h),        \
     (d, p, v, w, h))                                                                           \
  DS(X, cuMemsetD2D16_v2, (CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h),      \
     (d, p, v, w, h))                                                                           \
  DS(X, cuMemsetD2D32_v2, (CUdeviceptr d, size_t p, unsigned int v, size_t w, size_t h),        \
     (d, p, v, w, h))                                                                           \
  SZ(X, cuMemsetD8Async, (CUdeviceptr d, unsigned char v, size_t n, CUstream st), (d, v, n, st)) \
  SZ(X, cuMemsetD16Async, (CUdeviceptr d, unsigned short v, size_t n, CUstream st),             \
     (d, v, n, st))                                                                             \
  SZ(X, cuMemsetD32Async, (CUdeviceptr d, unsigned int v, size_t n, CUstream st), (d, v, n, st)) \
  SZ(X, cuMemsetD2D8Async,                                                                      \
     (CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h, CUstream st),               \
     (d, p, v, w, h, st))                                                                       \
  SZ(X, cuMemsetD2D16Async,                                                                     \
     (CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h, CUstream st),              \
     (d, p, v, w, h, st))                                                                       \
  SZ(X, cuMemsetD2D32Async,                                                                     \
     (CUdeviceptr d, size_t p, unsigned int v, size_t w, size_t h, CUstream st),                \
     (d, p, v, w, h, st))                                                                       \
  SZ(X, cuLaunchKernel,                                                                         \
     (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,            \
      unsigned bz, unsigned sh, CUstream st, void** p, void** e),                               \
     (f, gx, gy, gz, bx, by, bz, sh, st, p, e))                                                 \
  SZ(X, cuLaunchKernelEx, (Desc c, CUfunction f, void** p, void** e), (c, f, p, e))             \
  SZ(X, cuLaunchCooperativeKernel,                                                              \
     (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,            \
      unsigned bz, unsigned sh, CUstream st, void** p),                                         \
     (f, gx, gy, gz, bx, by, bz, sh, st, p))                                                    \
  X(cuLaunchCooperativeKernelMultiDevice, (void* l, unsigned n, unsigned f), (l, n, f))         \
  SZ(X, cuLaunchHostFunc, (CUstream st, void (*fn)(void*), void* u), (st, fn, u))               \
  SZ(X, cuGraphLaunch, (CUgraphExec g, CUstream st), (g, st))                                   \
  SZ(X, cuStreamWriteValue32, (CUstream st, CUdeviceptr a, cuuint32_t v, unsigned f),           \
     (st, a, v, f))                                                                             \
  SZ(X, cuStreamWriteValue32_v2, (CUstream st, CUdeviceptr a, cuuint32_t v, unsigned f),        \
     (st, a, v, f))                                                                             \
  SZ(X, cuStreamWriteValue64, (CUstream st, CUdeviceptr a, cuuint64_t v, unsigned f),           \
     (st, a, v, f))                                                                             \
  SZ(X, cuStreamWriteValue64_v2, (CUstream st, CUdeviceptr a, cuuint64_t v, unsigned f),        \
     (st, a, v, f))                                                                             \
  SZ(X, cuStreamBatchMemOp, (CUstream st, unsigned c, void* ops, unsigned f), (st, c, ops, f))  \
  SZ(X, cuStreamBatchMemOp_v2, (CUstream st, unsigned c, void* ops, unsigned f), (st, c, ops, f))

#define DEFINE_GATED(name, params, args)     \
  FASTSNAP_EXPORT CUresult name params {      \
    REAL_FN(real, #name, params);             \
    if (real == NULL) return CUDA_ERROR_NOT_FOUND; \
    GateEnter();                              \
    CUresult result = real args;              \
    GateLeave();                              \
    return result;                            \
  }

GATED_LIST(DEFINE_GATED)

#define EXPORT_ENTRY(name, params, args) {#name, (void*)name},

static const Export kGated[] = {GATED_LIST(EXPORT_ENTRY)};

const Export* GatedExports(size_t* count) {
  *count = sizeof kGated / sizeof kGated[0];
  return kGated;
}
