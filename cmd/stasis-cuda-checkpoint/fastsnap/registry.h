// The allocation table: every device allocation whose physical memory the fast path may
// release and put back at the same address, plus the first reason, if any, that the process
// cannot use the fast path at all.
//
// Two kinds of entry:
//   served    a cuMemAlloc_v2 of >= kServeMinBytes that the library made through VMM; the
//             reservation and handle are the library's, the workload only knows the address;
//   workload  a handle the workload made with cuMemCreate; `id` is the value the workload
//             holds, `handle` the driver's current one (they differ after an unstage, so
//             every interposed call that takes a handle translates it).
// Invariant: an entry is staged (present == 0) only between a stage and its unstage, and then
// the gate is closed, so no workload call observes or changes one.
#pragma once

#include <stddef.h>

#include "cuda_types.h"

enum { kServeMinBytes = 2u << 20 };
enum { kMaxAccessDescs = 8 };

typedef struct {
  CUdeviceptr addr;  // 0 while a workload handle is not mapped
  size_t size;
  CUmemGenericAllocationHandle id;
  CUmemGenericAllocationHandle handle;  // 0 while staged
  CUmemAllocationProp prop;
  CUcontext ctx;
  int served;
  int user_released;  // the workload released its handle while mapped; unmap frees it
  int present;        // physical memory is mapped at addr (0 only while staged)
  CUmemAccessDesc access[kMaxAccessDescs];
  size_t access_count;
  size_t arena_offset;  // where stage put its bytes
} Allocation;

typedef struct {
  Allocation* items;
  size_t count;
  size_t capacity;
  char unsupported[200];  // "" while the fast path is possible
} Registry;

// The table, locked; every RegistryLock is followed by one RegistryUnlock.
Registry* RegistryLock(void);
void RegistryUnlock(void);

// Records the first reason only: later ones are consequences or repeats.
void RegistryMarkUnsupported(const char* format, ...) __attribute__((format(printf, 1, 2)));
// Whether a reason was recorded (the process will never stage), copied into `why` when given.
int RegistryUnsupported(char* why, size_t n);

void RegistryAddServed(CUdeviceptr addr, size_t size, CUmemGenericAllocationHandle handle,
                       const CUmemAllocationProp* prop, CUcontext ctx);
// Removes the served entry at `addr` into `out`; 0 when `addr` is not one.
int RegistryTakeServed(CUdeviceptr addr, Allocation* out);

void RegistryCreated(CUmemGenericAllocationHandle handle, size_t size,
                     const CUmemAllocationProp* prop, CUcontext ctx);
void RegistryMapped(CUdeviceptr addr, size_t size, size_t offset, CUmemGenericAllocationHandle id);
void RegistryAccessSet(CUdeviceptr addr, size_t size, const CUmemAccessDesc* desc, size_t count);
void RegistryUnmapped(CUdeviceptr addr, size_t size);
// The driver's handle for the workload's `id`, forgetting the entry once it is released and
// unmapped. Returns `id` itself for handles the library does not track.
CUmemGenericAllocationHandle RegistryReleased(CUmemGenericAllocationHandle id);
CUmemGenericAllocationHandle RegistryRealHandle(CUmemGenericAllocationHandle id);
// Whether [addr, addr + size) touches tracked memory.
int RegistryTracks(CUdeviceptr addr, size_t size);
