// A stand-in GPU workload for the fast-snapshot tests, linked against the test stand-in
// libcuda (fake_libcuda_vmm.c) and run with LD_PRELOAD=libstasis-fastsnap.so. It allocates
// the ways real programs do — cuMemAlloc_v2 above and below the library's threshold, VMM
// directly, and through cuGetProcAddress found with dlsym, as libcudart does — fills each
// buffer with a position-dependent pattern, and then answers one command per stdin line:
//   check          copy every buffer back and compare: "check ok" | "check bad <buf> <word>"
//   live           "live <bytes>": the stand-in's live physical device bytes
//   managed | ipc  make a managed allocation / an IPC handle: "managed <rc>" | "ipc <rc>"
//   alloc-big      cuMemAlloc_v2 of 4 MiB: "alloc <rc> driver=<bytes the driver's own allocator
//                  made for it>" (0 when the library served it through VMM)
//   launch-start   a thread launching "kernels" (through cuGetProcAddress's cuLaunchKernel)
//                  that rewrite buffer A's pattern, in a loop: "launching"
//   launches       "launches <count>" kernels completed so far
//   launch-stop    "stopped <count>"
//   resolve-new    resolve, through cuGetProcAddress, two entry points the library does not
//                  gate (the stand-in's cuMemcpyDtoH_v9 and cuMemcpyFutureAsync), and
//                  cuMemAllocHost, which it leaves alone: "resolved <rc> <rc> direct|indirect,
//                  host <rc> direct|indirect" (indirect: not the driver's own definitions)
//   call-new       call both on buffer A (the future copy of A onto itself, then A read back):
//                  "called <rc> <rc> ok|bad"
//   free           free A and D (cuMemFree_v2, exported and through cuGetProcAddress) and C
//                  (unmap, release of the handle cuMemCreate gave, address free), with the
//                  handle and pointers it got at start: "freed <rc> <rc> <rc> <rc> <rc>"
//   exit
// Its first line is "ready tracked=<bytes of allocations >= 2 MiB>".
#define _GNU_SOURCE

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef struct {
  int type, requestedHandleTypes;
  struct {
    int type, id;
  } location;
  void* win32HandleMetaData;
  unsigned char allocFlags[8];
} Prop;
typedef struct {
  struct {
    int type, id;
  } location;
  int flags;
} Access;

CUresult cuInit(unsigned int);
CUresult cuCtxCreate_v2(void**, unsigned int, int);
CUresult cuMemAlloc_v2(CUdeviceptr*, size_t);
CUresult cuMemAllocManaged(CUdeviceptr*, size_t, unsigned int);
CUresult cuIpcGetMemHandle(void*, CUdeviceptr);
CUresult cuMemAddressReserve(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long);
CUresult cuMemCreate(unsigned long long*, size_t, const Prop*, unsigned long long);
CUresult cuMemMap(CUdeviceptr, size_t, size_t, unsigned long long, unsigned long long);
CUresult cuMemSetAccess(CUdeviceptr, size_t, const Access*, size_t);
CUresult cuMemUnmap(CUdeviceptr, size_t);
CUresult cuMemRelease(unsigned long long);
CUresult cuMemAddressFree(CUdeviceptr, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemcpyHtoD_v2(CUdeviceptr, const void*, size_t);
CUresult cuMemcpyDtoH_v2(void*, CUdeviceptr, size_t);
size_t fake_vmm_live_device_bytes(void);
size_t fake_vmm_plain_bytes(void);

typedef CUresult (*GetProc)(const char*, void**, int, unsigned long long, int*);
typedef CUresult (*AllocFn)(CUdeviceptr*, size_t);
typedef CUresult (*FreeFn)(CUdeviceptr);
typedef CUresult (*DtoHFn)(void*, CUdeviceptr, size_t);
typedef CUresult (*FutureFn)(CUdeviceptr, CUdeviceptr, size_t, void*, size_t, void*,
                             unsigned long long, unsigned long long, double);
typedef CUresult (*LaunchFn)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, void*, void**, void**);

enum { kBuffers = 4, kPerThreadStream = 2 };
static const char kNames[kBuffers] = {'A', 'B', 'C', 'D'};
static const size_t kSizes[kBuffers] = {8u << 20, 64u << 10, 4u << 20, 6u << 20};
static CUdeviceptr buffers[kBuffers];
static LaunchFn launch;
static FreeFn proc_free;
static unsigned long long handle_c;
static DtoHFn dtoh_v9;
static FutureFn future;

static void Die(const char* what, CUresult rc) {
  printf("failed %s %d\n", what, rc);
  exit(1);
}

static uint64_t Word(int buffer, size_t i) { return ((uint64_t)buffer << 56) ^ (i * 2654435761u); }

static void Fill(int b, uint64_t* host) {
  for (size_t i = 0; i < kSizes[b] / 8; i++) host[i] = Word(b, i);
}

static void Allocate(void) {
  CUresult rc = cuMemAlloc_v2(&buffers[0], kSizes[0]);
  if (rc != 0) Die("cuMemAlloc_v2 A", rc);
  if ((rc = cuMemAlloc_v2(&buffers[1], kSizes[1])) != 0) Die("cuMemAlloc_v2 B", rc);
  Prop prop = {.type = 1, .location = {1, 0}};
  Access access = {.location = {1, 0}, .flags = 3};
  if ((rc = cuMemAddressReserve(&buffers[2], kSizes[2], 0, 0, 0)) != 0) Die("reserve C", rc);
  if ((rc = cuMemCreate(&handle_c, kSizes[2], &prop, 0)) != 0) Die("create C", rc);
  if ((rc = cuMemMap(buffers[2], kSizes[2], 0, handle_c, 0)) != 0) Die("map C", rc);
  if ((rc = cuMemSetAccess(buffers[2], kSizes[2], &access, 1)) != 0) Die("access C", rc);
  // As libcudart does: its own handle, dlsym for cuGetProcAddress_v2, everything else from it.
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  GetProc get_proc = driver != NULL ? (GetProc)dlsym(driver, "cuGetProcAddress_v2") : NULL;
  if (get_proc == NULL) Die("dlsym cuGetProcAddress_v2", -1);
  AllocFn alloc = NULL;
  int status = 0;
  if ((rc = get_proc("cuMemAlloc", (void**)&alloc, 12000, 0, &status)) != 0) Die("proc alloc", rc);
  if ((rc = alloc(&buffers[3], kSizes[3])) != 0) Die("proc cuMemAlloc D", rc);
  if ((rc = get_proc("cuMemFree", (void**)&proc_free, 12000, 0, &status)) != 0) Die("proc free", rc);
  rc = get_proc("cuLaunchKernel", (void**)&launch, 12000, kPerThreadStream, &status);
  if (rc != 0) Die("proc launch", rc);
}

static void ResolveNew(void) {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  GetProc get_proc = driver != NULL ? (GetProc)dlsym(driver, "cuGetProcAddress_v2") : NULL;
  if (get_proc == NULL) Die("dlsym cuGetProcAddress_v2", -1);
  int status = 0;
  CUresult a = get_proc("cuMemcpyDtoH", (void**)&dtoh_v9, 90000, 0, &status);
  CUresult b = get_proc("cuMemcpyFutureAsync", (void**)&future, 13000, 0, &status);
  int direct = (void*)dtoh_v9 == dlsym(driver, "cuMemcpyDtoH_v9") &&
               (void*)future == dlsym(driver, "cuMemcpyFutureAsync");
  void* host_alloc = NULL;
  CUresult c = get_proc("cuMemAllocHost", &host_alloc, 13000, 0, &status);
  int host_direct = host_alloc != NULL && host_alloc == dlsym(driver, "cuMemAllocHost_v2");
  printf("resolved %d %d %s, host %d %s\n", a, b, direct ? "direct" : "indirect", c,
         host_direct ? "direct" : "indirect");
}

static void CallNew(void) {
  CUresult a = future(buffers[0], buffers[0], kSizes[0], (void*)0xa77, 1, (void*)0x5, 7, 8, 2.5);
  uint64_t* host = malloc(kSizes[0]);
  CUresult b = dtoh_v9(host, buffers[0], kSizes[0]);
  const size_t last = kSizes[0] / 8 - 1;
  int ok = b == 0 && host[0] == Word(0, 0) && host[last] == Word(0, last);
  free(host);
  printf("called %d %d %s\n", a, b, ok ? "ok" : "bad");
}

static int Check(void) {
  for (int b = 0; b < kBuffers; b++) {
    uint64_t* host = malloc(kSizes[b]);
    CUresult rc = cuMemcpyDtoH_v2(host, buffers[b], kSizes[b]);
    for (size_t i = 0; rc == 0 && i < kSizes[b] / 8; i++) {
      if (host[i] != Word(b, i)) {
        printf("check bad %c %zu\n", kNames[b], i);
        free(host);
        return 0;
      }
    }
    free(host);
    if (rc != 0) {
      printf("check bad %c copy %d\n", kNames[b], rc);
      return 0;
    }
  }
  printf("check ok\n");
  return 1;
}

// The "kernel": rewrites buffer A's pattern in place; after a stage, A is unmapped, so a launch
// the gate let through would fault here.
static void RewriteA(void** params) {
  uint64_t* a = (uint64_t*)(uintptr_t)*(CUdeviceptr*)params[0];
  for (size_t i = 0; i < kSizes[0] / 8; i++) a[i] = Word(0, i);
}

static volatile int launching;
static unsigned long launches;
static pthread_t launcher;

static void* LaunchLoop(void* arg) {
  (void)arg;
  while (__atomic_load_n(&launching, __ATOMIC_ACQUIRE)) {
    void* params[] = {&buffers[0]};
    CUresult rc = launch((void*)RewriteA, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL);
    if (rc != 0) Die("launch", rc);
    __atomic_add_fetch(&launches, 1, __ATOMIC_RELEASE);
  }
  return NULL;
}

static void Command(const char* line) {
  CUdeviceptr extra = 0;
  char handle[64];
  if (strcmp(line, "check") == 0) {
    Check();
  } else if (strcmp(line, "live") == 0) {
    printf("live %zu\n", fake_vmm_live_device_bytes());
  } else if (strcmp(line, "managed") == 0) {
    printf("managed %d\n", cuMemAllocManaged(&extra, 1u << 20, 1));
  } else if (strcmp(line, "alloc-big") == 0) {
    const size_t before = fake_vmm_plain_bytes();
    CUresult rc = cuMemAlloc_v2(&extra, 4u << 20);
    printf("alloc %d driver=%zu\n", rc, fake_vmm_plain_bytes() - before);
  } else if (strcmp(line, "ipc") == 0) {
    printf("ipc %d\n", cuIpcGetMemHandle(handle, buffers[1]));
  } else if (strcmp(line, "launch-start") == 0) {
    launching = 1;
    pthread_create(&launcher, NULL, LaunchLoop, NULL);
    printf("launching\n");
  } else if (strcmp(line, "launches") == 0) {
    printf("launches %lu\n", __atomic_load_n(&launches, __ATOMIC_ACQUIRE));
  } else if (strcmp(line, "launch-stop") == 0) {
    __atomic_store_n(&launching, 0, __ATOMIC_RELEASE);
    pthread_join(launcher, NULL);
    printf("stopped %lu\n", launches);
  } else if (strcmp(line, "resolve-new") == 0) {
    ResolveNew();
  } else if (strcmp(line, "call-new") == 0) {
    CallNew();
  } else if (strcmp(line, "free") == 0) {
    CUresult a = cuMemFree_v2(buffers[0]), d = proc_free(buffers[3]);
    CUresult unmap = cuMemUnmap(buffers[2], kSizes[2]), release = cuMemRelease(handle_c);
    printf("freed %d %d %d %d %d\n", a, d, unmap, release, cuMemAddressFree(buffers[2], kSizes[2]));
  } else if (strcmp(line, "exit") == 0) {
    exit(0);
  } else {
    printf("unknown %s\n", line);
  }
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  void* ctx = NULL;
  CUresult rc = cuInit(0);
  if (rc == 0) rc = cuCtxCreate_v2(&ctx, 0, 0);
  if (rc != 0) Die("init", rc);
  Allocate();
  size_t tracked = 0;
  for (int b = 0; b < kBuffers; b++) {
    uint64_t* host = malloc(kSizes[b]);
    Fill(b, host);
    if ((rc = cuMemcpyHtoD_v2(buffers[b], host, kSizes[b])) != 0) Die("fill", rc);
    free(host);
    if (kSizes[b] >= (2u << 20)) tracked += kSizes[b];
  }
  printf("ready tracked=%zu\n", tracked);
  char line[128];
  while (fgets(line, sizeof line, stdin) != NULL) {
    line[strcspn(line, "\n")] = '\0';
    Command(line);
  }
  return 0;
}
