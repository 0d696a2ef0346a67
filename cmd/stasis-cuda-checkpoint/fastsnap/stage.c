// Stage: gate closed, context synchronised, every tracked allocation copied into one pinned
// arena on one stream with one wait, then its physical memory unmapped and released with the
// address reservation kept. Unstage: new physical memory at each kept address, the arena
// copied up, the gate opened.
#define _GNU_SOURCE

#include "stage.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gate.h"
#include "real.h"
#include "registry.h"

// How long stage waits for wrapped calls already inside the driver (a synchronous copy, a
// launch waiting for queue space) before giving up and leaving the process to the plain path.
enum { kDrainTimeoutMs = 10000 };
enum { kArenaAlign = 2u << 20 };

// Kept from the first stage for the life of the process: making pinned memory costs ~0.5 s/GiB,
// and a mapped arena survives runsc's save once the driver's toggle has run.
static void* arena;
static size_t arena_size;
static CUstream stream;
static int staged;
static size_t staged_bytes;

static double NowMs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int Stageable(const Allocation* a) { return a->addr != 0 && a->access_count > 0; }

// The one context tracked memory lives in (registry.c refuses a second).
static CUcontext TrackedContext(const Registry* r) {
  for (size_t i = 0; i < r->count; i++) {
    if (r->items[i].ctx != NULL) return r->items[i].ctx;
  }
  return NULL;
}

static size_t TrackedBytes(const Registry* r, size_t* count) {
  size_t bytes = 0;
  *count = 0;
  for (size_t i = 0; i < r->count; i++) {
    if (!Stageable(&r->items[i])) continue;
    bytes += r->items[i].size;
    (*count)++;
  }
  return bytes;
}

// Lays the stageable allocations out in the arena, page-aligned; returns the bytes it needs.
static size_t LayOut(Registry* r) {
  size_t total = 0;
  for (size_t i = 0; i < r->count; i++) {
    if (!Stageable(&r->items[i])) continue;
    r->items[i].arena_offset = total;
    total += (r->items[i].size + 4095) & ~(size_t)4095;
  }
  return total;
}

static CUresult EnsureArena(const RealDriver* d, size_t bytes) {
  if (arena_size >= bytes) return CUDA_SUCCESS;
  size_t size = (bytes + kArenaAlign - 1) & ~(size_t)(kArenaAlign - 1);
  void* grown = NULL;
  CUresult result = d->cuMemHostAlloc(&grown, size, CU_MEMHOSTALLOC_PORTABLE);
  if (result != CUDA_SUCCESS) return result;
  if (arena != NULL) d->cuMemFreeHost(arena);
  arena = grown;
  arena_size = size;
  return CUDA_SUCCESS;
}

// Maps physical memory at the kept address again (the handle still held when a release
// failed, else a new one with the allocation's own properties) and queues the copy up.
static CUresult PutBack(const RealDriver* d, Allocation* a, char* why, size_t n) {
  CUresult result = CUDA_SUCCESS;
  const char* call = "cuMemCreate";
  if (a->handle == 0) result = d->cuMemCreate(&a->handle, a->size, &a->prop, 0);
  if (result == CUDA_SUCCESS) {
    call = "cuMemMap";
    result = d->cuMemMap(a->addr, a->size, 0, a->handle, 0);
  }
  if (result == CUDA_SUCCESS) {
    call = "cuMemSetAccess";
    result = d->cuMemSetAccess(a->addr, a->size, a->access, a->access_count);
    if (result != CUDA_SUCCESS) d->cuMemUnmap(a->addr, a->size);
  }
  if (result == CUDA_SUCCESS) {
    call = "cuMemcpyHtoDAsync";
    result = d->cuMemcpyHtoDAsync_v2(a->addr, (char*)arena + a->arena_offset, a->size, stream);
  }
  if (result != CUDA_SUCCESS) {
    snprintf(why, n, "%s failed (CUresult %d) for %zu bytes at 0x%llx", call, result, a->size,
             a->addr);
    return result;
  }
  a->present = 1;
  // The workload gave its handle up while mapped; the mapping alone keeps the memory, as before.
  if (a->user_released) {
    d->cuMemRelease(a->handle);
    a->handle = 0;
  }
  return CUDA_SUCCESS;
}

// Puts back every released allocation and waits for the copies. Returns the first failure.
static CUresult PutBackAll(const RealDriver* d, Registry* r, char* why, size_t n) {
  CUresult first = CUDA_SUCCESS;
  for (size_t i = 0; i < r->count; i++) {
    Allocation* a = &r->items[i];
    if (!Stageable(a) || a->present) continue;
    char later[160];  // only the first failure is reported
    CUresult result = first == CUDA_SUCCESS ? PutBack(d, a, why, n)
                                            : PutBack(d, a, later, sizeof later);
    if (first == CUDA_SUCCESS) first = result;
  }
  CUresult synced = d->cuStreamSynchronize(stream);
  if (first == CUDA_SUCCESS && synced != CUDA_SUCCESS) {
    snprintf(why, n, "cuStreamSynchronize after the copy up failed (CUresult %d)", synced);
    first = synced;
  }
  return first;
}

static CUresult Release(const RealDriver* d, Allocation* a, char* why, size_t n) {
  CUresult result = d->cuMemUnmap(a->addr, a->size);
  if (result != CUDA_SUCCESS) {
    snprintf(why, n, "cuMemUnmap failed (CUresult %d) at 0x%llx", result, a->addr);
    return result;
  }
  a->present = 0;
  if (a->handle == 0) return CUDA_SUCCESS;  // the workload's release already freed it
  result = d->cuMemRelease(a->handle);
  if (result != CUDA_SUCCESS) {
    snprintf(why, n, "cuMemRelease failed (CUresult %d) at 0x%llx", result, a->addr);
    return result;
  }
  a->handle = 0;
  return CUDA_SUCCESS;
}

// Synchronises, copies out and releases; on failure puts back what it had released.
static int StageLocked(const RealDriver* d, Registry* r, size_t arena_bytes, char* why,
                       size_t n) {
  CUresult result = d->cuCtxSetCurrent(TrackedContext(r));
  const char* step = "cuCtxSetCurrent";
  if (result == CUDA_SUCCESS) result = d->cuCtxSynchronize(), step = "cuCtxSynchronize";
  if (result == CUDA_SUCCESS) result = EnsureArena(d, arena_bytes), step = "cuMemHostAlloc of the arena";
  if (result == CUDA_SUCCESS && stream == NULL) {
    result = d->cuStreamCreate(&stream, 0), step = "cuStreamCreate";
  }
  for (size_t i = 0; i < r->count && result == CUDA_SUCCESS; i++) {
    Allocation* a = &r->items[i];
    if (!Stageable(a)) continue;
    result = d->cuMemcpyDtoHAsync_v2((char*)arena + a->arena_offset, a->addr, a->size, stream);
    step = "cuMemcpyDtoHAsync";
  }
  if (result == CUDA_SUCCESS) result = d->cuStreamSynchronize(stream), step = "cuStreamSynchronize";
  if (result != CUDA_SUCCESS) {
    snprintf(why, n, "%s failed (CUresult %d) while staging", step, result);
    return 0;
  }
  for (size_t i = 0; i < r->count; i++) {
    if (!Stageable(&r->items[i]) || Release(d, &r->items[i], why, n) == CUDA_SUCCESS) continue;
    char put_back[160] = "";
    if (PutBackAll(d, r, put_back, sizeof put_back) != CUDA_SUCCESS) {
      // The gate stays open on a fallback; the workload would fault on the missing memory,
      // which is no worse than silently running on it, and the log says where.
      FastsnapLog("stage failed (%s) and putting memory back failed too: %s", why, put_back);
    }
    return 0;
  }
  return 1;
}

void StageRequest(char* reply, size_t n) {
  const RealDriver* d = RealDriverGet();
  if (d == NULL) {
    snprintf(reply, n, "fallback libcuda.so.1 lacks an entry point the fast path needs");
    return;
  }
  if (staged) {
    snprintf(reply, n, "fallback already staged (unstage first)");
    return;
  }
  // An unsupported process answers at once rather than after draining the gate for nothing;
  // the reason is checked again once the gate is closed, in case it came meanwhile.
  char reason[200];
  if (RegistryUnsupported(reason, sizeof reason)) {
    snprintf(reply, n, "fallback %s", reason);
    return;
  }
  if (!GateClose(kDrainTimeoutMs)) {
    snprintf(reply, n, "fallback a CUDA call in flight did not return within %d ms",
             kDrainTimeoutMs);
    return;
  }
  const double start = NowMs();
  Registry* r = RegistryLock();
  char why[200] = "";
  size_t count = 0;
  const size_t bytes = TrackedBytes(r, &count);
  int ok = 0;
  if (r->unsupported[0] != '\0') {
    snprintf(why, sizeof why, "%s", r->unsupported);
  } else if (count == 0) {
    snprintf(why, sizeof why, "no tracked device memory to stage");
  } else {
    ok = StageLocked(d, r, LayOut(r), why, sizeof why);
  }
  RegistryUnlock();
  if (!ok) {
    GateOpen();
    snprintf(reply, n, "fallback %s", why);
    return;
  }
  staged = 1;
  staged_bytes = bytes;
  snprintf(reply, n, "staged %zu %.1f", bytes, NowMs() - start);
}

void UnstageRequest(char* reply, size_t n) {
  const RealDriver* d = RealDriverGet();
  if (!staged || d == NULL) {
    snprintf(reply, n, "idle");
    return;
  }
  const double start = NowMs();
  Registry* r = RegistryLock();
  char why[200] = "";
  CUresult result = d->cuCtxSetCurrent(TrackedContext(r));
  if (result != CUDA_SUCCESS) {
    snprintf(why, sizeof why, "cuCtxSetCurrent failed (CUresult %d)", result);
  } else {
    result = PutBackAll(d, r, why, sizeof why);
  }
  RegistryUnlock();
  if (result != CUDA_SUCCESS) {
    snprintf(reply, n, "error %s; the workload's CUDA calls stay blocked", why);
    return;
  }
  staged = 0;
  GateOpen();
  snprintf(reply, n, "unstaged %zu %.1f", staged_bytes, NowMs() - start);
}

void StatusRequest(char* reply, size_t n) {
  Registry* r = RegistryLock();
  size_t count = 0;
  const size_t bytes = TrackedBytes(r, &count);
  if (r->unsupported[0] != '\0') {
    snprintf(reply, n, "unsupported %s", r->unsupported);
  } else {
    snprintf(reply, n, "ok %zu %zu", bytes, count);
  }
  RegistryUnlock();
}
