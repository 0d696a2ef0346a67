// The slice of cuda.h (CUDA 12.x/13.0) that libstasis-fastsnap interposes or calls, declared
// here so that the library builds without the CUDA toolkit. Handles are opaque pointers and
// enums are int-sized on every ABI the driver ships for, as in cuda.h.
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;  // CUdeviceptr_v2: 64 bits since CUDA 3.2
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct CUctx_st* CUcontext;
typedef struct CUstream_st* CUstream;
typedef struct CUfunc_st* CUfunction;
typedef struct CUarray_st* CUarray;
typedef struct CUgraph_st* CUgraph;
typedef struct CUgraphNode_st* CUgraphNode;
typedef struct CUgraphExec_st* CUgraphExec;
typedef struct CUmemPoolHandle_st* CUmemoryPool;

enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_SUPPORTED = 801,
};

// CUmemLocation, CUmemAllocationProp and CUmemAccessDesc, field for field.
typedef struct {
  int type;  // CUmemLocationType
  int id;
} CUmemLocation;
enum { CU_MEM_LOCATION_TYPE_DEVICE = 1 };

typedef struct {
  int type;                  // CUmemAllocationType
  int requestedHandleTypes;  // CUmemAllocationHandleType
  CUmemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
} CUmemAllocationProp;
enum { CU_MEM_ALLOCATION_TYPE_PINNED = 1 };
enum { CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0 };

typedef struct {
  CUmemLocation location;
  int flags;  // CUmemAccess_flags
} CUmemAccessDesc;
enum { CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3 };

// cuMemHostAlloc: usable from every context, so the arena outlives which one is current.
enum { CU_MEMHOSTALLOC_PORTABLE = 1 };

typedef struct {
  char reserved[64];
} CUipcMemHandle;

typedef unsigned long long cuuint64_t;
typedef unsigned int cuuint32_t;
typedef int CUdriverProcAddressQueryResult;
