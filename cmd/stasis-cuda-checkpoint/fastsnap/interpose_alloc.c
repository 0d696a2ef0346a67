// The allocation calls. A cuMemAlloc_v2 of >= kServeMinBytes is served through VMM
// (reserve + create + map + set access) so that its physical memory can be released at stage
// and mapped again at the same address at unstage; smaller ones go to the driver unchanged (its
// own checkpoint moves them). The workload's own VMM calls are recorded, with its handles
// translated to the driver's current ones after an unstage replaced them.
#define _GNU_SOURCE

#include "control.h"
#include "gate.h"
#include "interpose.h"
#include "registry.h"

// Reserves, creates, maps and opens `size` bytes (rounded up to the granularity) on the current
// context's device; undoes what it did on failure.
static CUresult ServeVmm(const RealDriver* d, CUdeviceptr* out, size_t size) {
  CUcontext ctx = NULL;
  CUdevice device = 0;
  CUresult result = d->cuCtxGetCurrent(&ctx);
  if (result == CUDA_SUCCESS) result = d->cuCtxGetDevice(&device);
  CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                              .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = device}};
  size_t granularity = 0;
  if (result == CUDA_SUCCESS) {
    result = d->cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  }
  if (result != CUDA_SUCCESS || granularity == 0) return result ? result : CUDA_ERROR_NOT_SUPPORTED;
  size = (size + granularity - 1) / granularity * granularity;
  CUdeviceptr addr = 0;
  CUmemGenericAllocationHandle handle = 0;
  const CUmemAccessDesc access = {.location = prop.location,
                                  .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  result = d->cuMemAddressReserve(&addr, size, granularity, 0, 0);
  if (result != CUDA_SUCCESS) return result;
  result = d->cuMemCreate(&handle, size, &prop, 0);
  if (result == CUDA_SUCCESS) {
    result = d->cuMemMap(addr, size, 0, handle, 0);
    if (result == CUDA_SUCCESS) {
      result = d->cuMemSetAccess(addr, size, &access, 1);
      if (result != CUDA_SUCCESS) d->cuMemUnmap(addr, size);
    }
    if (result != CUDA_SUCCESS) d->cuMemRelease(handle);
  }
  if (result != CUDA_SUCCESS) {
    d->cuMemAddressFree(addr, size);
    return result;
  }
  RegistryAddServed(addr, size, handle, &prop, ctx);
  *out = addr;
  return CUDA_SUCCESS;
}

FASTSNAP_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* out, size_t size) {
  const RealDriver* d = RealDriverGet();
  if (d == NULL) return CUDA_ERROR_NOT_FOUND;
  GateEnter();
  // A failed VMM allocation (no VMM support, a full address space) falls back to the
  // driver's allocator, which the driver's checkpoint handles; out-of-memory fails there too.
  // A process that can never stage (cudart asks for every entry point before its first
  // allocation) gets the driver's allocator from the start: the plain path it will take then
  // moves exactly what it would without the library.
  const int serve = size >= kServeMinBytes && !RegistryUnsupported(NULL, 0);
  CUresult result = serve ? ServeVmm(d, out, size) : CUDA_ERROR_NOT_SUPPORTED;
  if (result == CUDA_SUCCESS) {
    ControlEnsureStarted();
  } else {
    result = d->cuMemAlloc_v2(out, size);
  }
  GateLeave();
  return result;
}

FASTSNAP_EXPORT CUresult cuMemFree_v2(CUdeviceptr ptr) {
  const RealDriver* d = RealDriverGet();
  if (d == NULL) return CUDA_ERROR_NOT_FOUND;
  GateEnter();
  Allocation a;
  CUresult result;
  if (RegistryTakeServed(ptr, &a)) {
    // cuMemFree waits for the device's work on the memory; unmapping does not promise to.
    result = d->cuCtxSynchronize();
    if (result == CUDA_SUCCESS) result = d->cuMemUnmap(a.addr, a.size);
    if (result == CUDA_SUCCESS) result = d->cuMemRelease(a.handle);
    if (result == CUDA_SUCCESS) result = d->cuMemAddressFree(a.addr, a.size);
  } else {
    result = d->cuMemFree_v2(ptr);
  }
  GateLeave();
  return result;
}

FASTSNAP_EXPORT CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment,
                                             CUdeviceptr addr, unsigned long long flags) {
  const RealDriver* d = RealDriverGet();
  if (d == NULL) return CUDA_ERROR_NOT_FOUND;
  GateEnter();
  CUresult result = d->cuMemAddressReserve(ptr, size, alignment, addr, flags);
  GateLeave();
  return result;
}

FASTSNAP_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  const RealDriver* d = RealDriverGet();
  if (d == NULL) return CUDA_ERROR_NOT_FOUND;
  GateEnter();
  CUresult result = d->cuMemAddressFree(ptr, size);
  if (result == CUDA_SUCCESS) RegistryUnmapped(ptr, size);
  GateLeave();
  return result;
}

FASTSNAP_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                     const CUmemAllocationProp* prop, unsigned long long flags) {
  const RealDriver* d = RealDriverGet();
  if (d == NULL) return CUDA_ERROR_NOT_FOUND;
  GateEnter();
  CUresult result = d->cuMemCreate(handle, size, prop, flags);
  if (result == CUDA_SUCCESS && prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    RegistryMarkUnsupported("cuMemCreate of memory not located on a device");
  } else if (result == CUDA_SUCCESS) {
    CUcontext ctx = NULL;
    d->cuCtxGetCurrent(&ctx);
    RegistryCreated(*handle, size, prop, ctx);
    ControlEnsureStarted();
  }
  GateLeave();
  return result;
}

FASTSNAP_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  const RealDriver* d = RealDriverGet();
  if (d == NULL) return CUDA_ERROR_NOT_FOUND;
  GateEnter();
  CUresult result = d->cuMemRelease(RegistryReleased(handle));
  GateLeave();
  return result;
}

FASTSNAP_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                  CUmemGenericAllocationHandle handle, unsigned long long flags) {
  const RealDriver* d = RealDriverGet();
  if (d == NULL) return CUDA_ERROR_NOT_FOUND;
  GateEnter();
  CUresult result = d->cuMemMap(ptr, size, offset, RegistryRealHandle(handle), flags);
  if (result == CUDA_SUCCESS) RegistryMapped(ptr, size, offset, handle);
  GateLeave();
  return result;
}

FASTSNAP_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  const RealDriver* d = RealDriverGet();
  if (d == NULL) return CUDA_ERROR_NOT_FOUND;
  GateEnter();
  CUresult result = d->cuMemUnmap(ptr, size);
  if (result == CUDA_SUCCESS) RegistryUnmapped(ptr, size);
  GateLeave();
  return result;
}

FASTSNAP_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                                        size_t count) {
  const RealDriver* d = RealDriverGet();
  if (d == NULL) return CUDA_ERROR_NOT_FOUND;
  GateEnter();
  CUresult result = d->cuMemSetAccess(ptr, size, desc, count);
  if (result == CUDA_SUCCESS) RegistryAccessSet(ptr, size, desc, count);
  GateLeave();
  return result;
}

FASTSNAP_EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop,
                                                                CUmemGenericAllocationHandle handle) {
  REAL_FN(real, "cuMemGetAllocationPropertiesFromHandle",
          (CUmemAllocationProp*, CUmemGenericAllocationHandle));
  return real != NULL ? real(prop, RegistryRealHandle(handle)) : CUDA_ERROR_NOT_FOUND;
}

// The handle it returns is the driver's current one, which the table would not know as the
// workload's; a second reference would also outlive the stage's release.
FASTSNAP_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle,
                                                     void* addr) {
  REAL_FN(real, "cuMemRetainAllocationHandle", (CUmemGenericAllocationHandle*, void*));
  if (real == NULL) return CUDA_ERROR_NOT_FOUND;
  if (RegistryTracks((CUdeviceptr)(uintptr_t)addr, 1)) {
    RegistryMarkUnsupported("cuMemRetainAllocationHandle on tracked memory");
  }
  return real(handle, addr);
}

static const Export kAlloc[] = {
#define ENTRY(name) {#name, (void*)name}
    ENTRY(cuMemAlloc_v2),   ENTRY(cuMemFree_v2), ENTRY(cuMemAddressReserve),
    ENTRY(cuMemAddressFree), ENTRY(cuMemCreate), ENTRY(cuMemRelease),
    ENTRY(cuMemMap),        ENTRY(cuMemUnmap),   ENTRY(cuMemSetAccess),
    ENTRY(cuMemGetAllocationPropertiesFromHandle), ENTRY(cuMemRetainAllocationHandle),
#undef ENTRY
};

const Export* AllocExports(size_t* count) {
  *count = sizeof kAlloc / sizeof kAlloc[0];
  return kAlloc;
}
