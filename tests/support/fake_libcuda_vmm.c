// TEST STAND-IN, NOT A DRIVER. Linked with fake_libcuda_r580.c into one libcuda.so.1
// (build/tests/fake-libcuda-vmm/) for the fast-snapshot tests: the helper finds the R580
// checkpoint state machine in it, and a test workload (tests/support/fastsnap_workload.c)
// finds "device memory" simulated in host memory, so that libstasis-fastsnap's staging can be
// checked byte for byte without a GPU. Whether the fast path works with NVIDIA's driver is a
// question for a GPU run, not for this file.
//
// The simulation:
//   cuMemAddressReserve  an mmap with PROT_NONE (a reservation: any access faults);
//   cuMemCreate          a memfd of the size (physical memory; counted as live bytes);
//   cuMemMap             the memfd mapped MAP_FIXED|MAP_SHARED at the address, still PROT_NONE;
//   cuMemSetAccess       mprotect read-write;
//   cuMemUnmap           the range back to a PROT_NONE reservation, so a stray access after a
//                        stage faults instead of silently reading stale bytes;
//   cuMemAlloc_v2        an anonymous read-write mapping (counted as live bytes);
//   cuMemcpy*, cuMemset* memcpy/memset, synchronous (streams are names only);
//   cuLaunchKernel       the CUfunction is a host function `void (*)(void** params)`, called
//                        with kernelParams on the calling thread;
//   cuGetProcAddress(_v2) the exported variant for the version and per-thread-stream flag.
// fake_vmm_live_device_bytes() (not a driver call) reports the live physical bytes, and
// fake_vmm_plain_bytes() those of them that cuMemAlloc_v2 (the driver's own allocator) made.
// FAKE_LIBCUDA_VMM_UNMAPS=<n> (read by this stand-in in the workload): cuMemUnmap succeeds n
// times, then fails with CUDA_ERROR_INVALID_VALUE, to exercise a stage that must roll back.
#define _GNU_SOURCE

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long Handle;
typedef void* Opaque;

enum { kInvalidValue = 1, kOutOfMemory = 2, kNotFound = 500 };
enum { kGranularity = 2u << 20, kMaxHandles = 1024 };

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static struct {
  int fd;
  size_t size;
  int refs;  // the handle itself, plus one per mapping
} handles[kMaxHandles];
static size_t live_bytes;

size_t fake_vmm_live_device_bytes(void) {
  pthread_mutex_lock(&mutex);
  size_t bytes = live_bytes;
  pthread_mutex_unlock(&mutex);
  return bytes;
}

size_t fake_vmm_plain_bytes(void);

// Contexts: a few static objects; the current one is per thread, as in the driver.
static char contexts[4];
static __thread Opaque current;

CUresult cuCtxCreate_v2(Opaque* ctx, unsigned int flags, int device) {
  (void)flags;
  if (device < 0 || device >= 4) return kInvalidValue;
  *ctx = current = &contexts[device];
  return 0;
}
CUresult cuCtxGetCurrent(Opaque* ctx) {
  *ctx = current;
  return 0;
}
CUresult cuCtxSetCurrent(Opaque ctx) {
  current = ctx;
  return 0;
}
CUresult cuCtxGetDevice(int* device) {
  if (current == NULL) return 201;  // CUDA_ERROR_INVALID_CONTEXT
  *device = (int)((char*)current - contexts);
  return 0;
}
CUresult cuCtxSynchronize(void) { return current != NULL ? 0 : 201; }
CUresult cuDeviceGet(int* device, int ordinal) {
  *device = ordinal;
  return 0;
}

CUresult cuMemGetAllocationGranularity(size_t* granularity, const void* prop, int option) {
  (void)prop;
  (void)option;
  *granularity = kGranularity;
  return 0;
}

CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags) {
  (void)alignment;
  (void)flags;
  void* p = mmap((void*)(uintptr_t)addr, size, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return kOutOfMemory;
  *ptr = (CUdeviceptr)(uintptr_t)p;
  return 0;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  return munmap((void*)(uintptr_t)ptr, size) == 0 ? 0 : kInvalidValue;
}

CUresult cuMemCreate(Handle* out, size_t size, const void* prop, unsigned long long flags) {
  (void)prop;
  (void)flags;
  if (size == 0 || size % kGranularity != 0) return kInvalidValue;
  int fd = memfd_create("fake-device-memory", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, (off_t)size) != 0) return kOutOfMemory;
  pthread_mutex_lock(&mutex);
  Handle h = 1;
  while (h < kMaxHandles && handles[h].refs > 0) h++;
  if (h < kMaxHandles) {
    handles[h].fd = fd;
    handles[h].size = size;
    handles[h].refs = 1;
    live_bytes += size;
  }
  pthread_mutex_unlock(&mutex);
  if (h == kMaxHandles) {
    close(fd);
    return kOutOfMemory;
  }
  *out = h;
  return 0;
}

// Drops one reference; the last one frees the "physical memory". Called with the mutex held.
static void Unref(Handle h) {
  if (--handles[h].refs > 0) return;
  close(handles[h].fd);
  live_bytes -= handles[h].size;
}

CUresult cuMemRelease(Handle h) {
  pthread_mutex_lock(&mutex);
  CUresult result = h > 0 && h < kMaxHandles && handles[h].refs > 0 ? 0 : kInvalidValue;
  if (result == 0) Unref(h);
  pthread_mutex_unlock(&mutex);
  return result;
}

// Which handle backs each mapping, so unmap can drop its reference.
enum { kMaxMappings = 1024 };
static struct {
  CUdeviceptr addr;
  size_t size;
  Handle handle;
} mappings[kMaxMappings];

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, Handle h, unsigned long long flags) {
  (void)flags;
  pthread_mutex_lock(&mutex);
  CUresult result = kInvalidValue;
  size_t slot = 0;
  while (slot < kMaxMappings && mappings[slot].addr != 0) slot++;
  if (h > 0 && h < kMaxHandles && handles[h].refs > 0 && offset + size <= handles[h].size &&
      slot < kMaxMappings &&
      mmap((void*)(uintptr_t)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, handles[h].fd,
           (off_t)offset) != MAP_FAILED) {
    mappings[slot].addr = ptr;
    mappings[slot].size = size;
    mappings[slot].handle = h;
    handles[h].refs++;
    result = 0;
  }
  pthread_mutex_unlock(&mutex);
  return result;
}

// Whether FAKE_LIBCUDA_VMM_UNMAPS allows one more unmap. Called with the mutex held.
static int UnmapAllowed(void) {
  static long left = -2;  // -2: not read yet; -1: no limit
  if (left == -2) {
    const char* limit = getenv("FAKE_LIBCUDA_VMM_UNMAPS");
    left = limit != NULL ? atol(limit) : -1;
  }
  if (left == -1) return 1;
  return left > 0 ? (left--, 1) : 0;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  pthread_mutex_lock(&mutex);
  CUresult result = kInvalidValue;
  if (!UnmapAllowed()) {
    pthread_mutex_unlock(&mutex);
    return kInvalidValue;
  }
  for (size_t i = 0; i < kMaxMappings; i++) {
    if (mappings[i].addr != ptr || mappings[i].size != size) continue;
    mmap((void*)(uintptr_t)ptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED |
         MAP_NORESERVE, -1, 0);
    Unref(mappings[i].handle);
    mappings[i].addr = 0;
    result = 0;
    break;
  }
  pthread_mutex_unlock(&mutex);
  return result;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const void* desc, size_t count) {
  (void)desc;
  (void)count;
  return mprotect((void*)(uintptr_t)ptr, size, PROT_READ | PROT_WRITE) == 0 ? 0 : kInvalidValue;
}

// cuMemAlloc_v2's sizes, for cuMemFree_v2 and the live count.
static struct {
  CUdeviceptr addr;
  size_t size;
} plain[kMaxMappings];

static CUresult PlainAlloc(CUdeviceptr* out, size_t size) {
  void* p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return kOutOfMemory;
  pthread_mutex_lock(&mutex);
  size_t slot = 0;
  while (slot < kMaxMappings && plain[slot].addr != 0) slot++;
  if (slot < kMaxMappings) {
    plain[slot].addr = (CUdeviceptr)(uintptr_t)p;
    plain[slot].size = size;
    live_bytes += size;
  }
  pthread_mutex_unlock(&mutex);
  *out = (CUdeviceptr)(uintptr_t)p;
  return 0;
}

size_t fake_vmm_plain_bytes(void) {
  pthread_mutex_lock(&mutex);
  size_t bytes = 0;
  for (size_t i = 0; i < kMaxMappings; i++) bytes += plain[i].addr != 0 ? plain[i].size : 0;
  pthread_mutex_unlock(&mutex);
  return bytes;
}

CUresult cuMemAlloc_v2(CUdeviceptr* out, size_t size) { return PlainAlloc(out, size); }
CUresult cuMemAllocManaged(CUdeviceptr* out, size_t size, unsigned int flags) {
  (void)flags;
  return PlainAlloc(out, size);
}

CUresult cuMemFree_v2(CUdeviceptr ptr) {
  pthread_mutex_lock(&mutex);
  CUresult result = kInvalidValue;
  for (size_t i = 0; i < kMaxMappings; i++) {
    if (plain[i].addr != ptr) continue;
    munmap((void*)(uintptr_t)ptr, plain[i].size);
    live_bytes -= plain[i].size;
    plain[i].addr = 0;
    result = 0;
    break;
  }
  pthread_mutex_unlock(&mutex);
  return result;
}

CUresult cuIpcGetMemHandle(void* handle, CUdeviceptr ptr) {
  memset(handle, 0, 64);
  memcpy(handle, &ptr, sizeof ptr);
  return 0;
}

CUresult cuMemHostAlloc(void** out, size_t size, unsigned int flags) {
  (void)flags;
  void* p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return kOutOfMemory;
  *out = p;
  return 0;
}
// The size is not kept: the pinned arena is freed only when it grows, and a leaked mapping
// in a test process is harmless.
CUresult cuMemFreeHost(void* p) {
  (void)p;
  return 0;
}

#define COPY(dst, src, n) (memcpy((void*)(uintptr_t)(dst), (const void*)(uintptr_t)(src), n), 0)
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void* s, size_t n) { return COPY(d, s, n); }
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr d, const void* s, size_t n) { return COPY(d, s, n); }
CUresult cuMemcpyDtoH_v2(void* d, CUdeviceptr s, size_t n) { return COPY(d, s, n); }
CUresult cuMemcpyDtoH_v2_ptds(void* d, CUdeviceptr s, size_t n) { return COPY(d, s, n); }
CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) { return COPY(d, s, n); }
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void* s, size_t n, Opaque st) {
  (void)st;
  return COPY(d, s, n);
}
CUresult cuMemcpyDtoHAsync_v2(void* d, CUdeviceptr s, size_t n, Opaque st) {
  (void)st;
  return COPY(d, s, n);
}
CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned int v, size_t n) {
  for (size_t i = 0; i < n; i++) ((unsigned int*)(uintptr_t)d)[i] = v;
  return 0;
}

static char streams[8];
static int next_stream;
CUresult cuStreamCreate(Opaque* st, unsigned int flags) {
  (void)flags;
  *st = &streams[__atomic_fetch_add(&next_stream, 1, __ATOMIC_RELAXED) % 8];
  return 0;
}
CUresult cuStreamSynchronize(Opaque st) {
  (void)st;
  return 0;
}

typedef void (*HostKernel)(void** params);
static CUresult Launch(Opaque f, void** params) {
  HostKernel kernel;
  memcpy(&kernel, &f, sizeof f);
  kernel(params);
  return 0;
}
CUresult cuLaunchKernel(Opaque f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned sh, Opaque st, void** params, void** extra) {
  (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)sh, (void)st, (void)extra;
  return Launch(f, params);
}
CUresult cuLaunchKernel_ptsz(Opaque f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned sh, Opaque st, void** params,
                             void** extra) {
  (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)sh, (void)st, (void)extra;
  return Launch(f, params);
}

// Two entry points libstasis-fastsnap's table does not have, for its trampolines: a variant of
// a wrapped name newer than the table (handed out from version 90000, as the driver hands out
// cuMemcpyBatchAsync_v2 to CUDA 13), and a name the library does not know. The second checks
// arguments in every register class and on the stack: a trampoline that lost one fails it.
CUresult cuMemcpyDtoH_v9(void* d, CUdeviceptr s, size_t n) {
  memcpy(d, (const void*)(uintptr_t)s, n);
  return 0;
}
CUresult cuMemcpyFutureAsync(CUdeviceptr d, CUdeviceptr s, size_t n, void* attrs, size_t count,
                             void* stream, unsigned long long tag7, unsigned long long tag8,
                             double check) {
  if (attrs != (void*)0xa77 || count != 1 || stream != (void*)0x5 || tag7 != 7 || tag8 != 8 ||
      check != 2.5) {
    return kInvalidValue;
  }
  memmove((void*)(uintptr_t)d, (const void*)(uintptr_t)s, n);
  return 0;
}

// Pinned host memory, which the fast path leaves alone: its lookup must reach the driver's own.
CUresult cuMemAllocHost_v2(void** p, size_t n) {
  *p = malloc(n);
  return *p != NULL ? 0 : kOutOfMemory;
}

// Candidates in the driver's order of preference: the per-thread-stream variant when asked for
// (flag 2, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM), the stand-in's _v9 of "version
// 90000", the _v2 of CUDA 3.2+, the base name.
static CUresult GetProc(const char* symbol, void** pfn, int version, unsigned long long flags) {
  void* self = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  const char* versions[] = {version >= 90000 ? "_v9" : "", version >= 3020 ? "_v2" : "", ""};
  const char* streams_suffix[] = {(flags & 2) ? "_ptds" : "", (flags & 2) ? "_ptsz" : "", ""};
  *pfn = NULL;
  for (int v = 0; v < 3 && *pfn == NULL; v++) {
    for (int s = 0; s < 3 && *pfn == NULL; s++) {
      char name[128];
      snprintf(name, sizeof name, "%s%s%s", symbol, versions[v], streams_suffix[s]);
      *pfn = self != NULL ? dlsym(self, name) : NULL;
    }
  }
  if (self != NULL) dlclose(self);
  return *pfn != NULL ? 0 : kNotFound;
}
CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, unsigned long long flags,
                             int* status) {
  CUresult result = GetProc(symbol, pfn, version, flags);
  if (status != NULL) *status = result == 0 ? 0 : 1;  // CU_GET_PROC_ADDRESS_SUCCESS / _SYMBOL_NOT_FOUND
  return result;
}
CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, unsigned long long flags) {
  return GetProc(symbol, pfn, version, flags);
}
