// The steps of a copy-speed GPU snapshot, each timed, for hack/gpu-fast-snapshot-probe.sh: can
// device memory leave through a pinned arena at the copy limit inside gVisor, be released so
// that the driver's checkpoint has (almost) nothing left to move, and come back at the same
// virtual address after a restore? Run once on the host and once in runsc (nvproxy), it says
// which step gVisor slows and by how much, before any interposition library is built.
//
// The device memory is one VMM allocation (cuMemAddressReserve + cuMemCreate + cuMemMap): the
// reservation is kept while the physical memory is released, so the same address can be
// mapped again after the restore, as a fast path must for the workload's pointers to hold.
//
// Output on stdout, one line per event, "key=value" fields (times in ms, rates in GB/s of
// 1e9 bytes):
//   ready pid=P gib=N va=0x...
//   stage pin_alloc_ms= d2h_pinned_gbps= arena_alloc_ms= pinned_to_arena_gbps=
//         d2h_pageable_gbps= register=ok|err:<code> d2h_registered_gbps= unmap_release_ms=
//         free_pinned_ms= staged_ms=   (after SIGUSR1, or at once with --cycle)
//   unstage map_ms= same_va=yes|no h2d_pageable_gbps= verify ok|FAILED mismatches=M
//         unstaged_ms=               (after SIGUSR2, or after the stage with --cycle)
//   check same_va=yes|no verify ok|FAILED mismatches=M
//                                    (after SIGUSR2 when nothing is staged: the plain path)
//   exit clean                       (after SIGTERM, or at the end of --cycle)
//
// Usage: fast_snapshot_probe --gib N [--cycle] [--keep-pinned]
//   --keep-pinned   the stage keeps its pinned arena: what runsc's save does with a live
//                   pinned mapping (expected: refused, frontendFDMemmapFile)
#include <cuda.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "workload_kernels.cuh"

static volatile sig_atomic_t g_stage = 0, g_unstage = 0, g_stop = 0;
static void OnSignal(int sig) {
  if (sig == SIGUSR1) g_stage = 1;
  if (sig == SIGUSR2) g_unstage = 1;
  if (sig == SIGTERM || sig == SIGINT) g_stop = 1;
}

static void Die(const char* what, const char* err) {
  printf("failed %s: %s\n", what, err);
  fflush(stdout);
  exit(1);
}
#define CU(call)                                         \
  do {                                                   \
    CUresult r_ = (call);                                \
    if (r_ != CUDA_SUCCESS) {                            \
      const char* s_ = "?";                              \
      cuGetErrorString(r_, &s_);                         \
      Die(#call, s_);                                    \
    }                                                    \
  } while (0)
#define RT(call)                                         \
  do {                                                   \
    cudaError_t e_ = (call);                             \
    if (e_ != cudaSuccess) Die(#call, cudaGetErrorString(e_)); \
  } while (0)

static double NowMs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}
static double Gbps(size_t bytes, double ms) { return bytes / 1e9 / (ms / 1e3); }

// A host copy on every core: the arena leaves pinned memory at the memory system's speed,
// not one core's.
static void ParallelCopy(char* dst, const char* src, size_t bytes) {
  unsigned n = std::thread::hardware_concurrency();
  if (n == 0) n = 4;
  size_t share = (bytes / n + 4095) & ~size_t(4095);
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < n; t++) {
    size_t off = t * share;
    if (off >= bytes) break;
    size_t len = off + share > bytes ? bytes - off : share;
    threads.emplace_back([=] { memcpy(dst + off, src + off, len); });
  }
  for (auto& t : threads) t.join();
}

struct Device {
  CUdeviceptr va = 0;
  size_t bytes = 0;
  CUmemGenericAllocationHandle handle = 0;
  CUmemAllocationProp prop = {};
  CUmemAccessDesc access = {};
};

static void MapPhysical(Device& d) {
  CU(cuMemCreate(&d.handle, d.bytes, &d.prop, 0));
  CU(cuMemMap(d.va, d.bytes, 0, d.handle, 0));
  CU(cuMemSetAccess(d.va, d.bytes, &d.access, 1));
}

static Device Allocate(size_t bytes) {
  Device d;
  d.prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  d.prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  d.prop.location.id = 0;
  size_t granularity = 0;
  CU(cuMemGetAllocationGranularity(&granularity, &d.prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  d.bytes = (bytes + granularity - 1) / granularity * granularity;
  d.access.location = d.prop.location;
  d.access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CU(cuMemAddressReserve(&d.va, d.bytes, 0, 0, 0));
  MapPhysical(d);
  return d;
}

static const uint32_t kSeed = 0x5717A515u;

static unsigned long long Mismatches(const Device& d) {
  unsigned long long* bad;
  RT(cudaMalloc(&bad, sizeof *bad));
  RT(cudaMemset(bad, 0, sizeof *bad));
  Verify<<<1024, 256>>>((const uint32_t*)d.va, d.bytes / 4, kSeed, bad);
  unsigned long long host = 0;
  RT(cudaMemcpy(&host, bad, sizeof host, cudaMemcpyDeviceToHost));
  RT(cudaFree(bad));
  return host;
}

struct Arena {
  char* bytes = nullptr;  // ordinary anonymous memory: what runsc's save can carry
  size_t size = 0;
  void* pinned = nullptr;  // kept only with --keep-pinned
};

// Device → pinned at the copy limit → ordinary memory; device memory released, reservation
// kept. Also times the two alternatives a design could take instead (D2H straight into
// pageable memory, and into pageable memory registered with the driver).
static Arena Stage(Device& d, bool keep_pinned) {
  Arena a;
  a.size = d.bytes;
  double t0 = NowMs(), t;
  void* pinned = nullptr;
  CU(cuMemHostAlloc(&pinned, d.bytes, 0));
  double pin_alloc = NowMs() - t0;
  t = NowMs();
  CU(cuMemcpyDtoH(pinned, d.va, d.bytes));
  double d2h_pinned = NowMs() - t;
  t = NowMs();
  a.bytes = (char*)mmap(nullptr, d.bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (a.bytes == MAP_FAILED) Die("mmap arena", strerror(errno));
  memset(a.bytes, 0, d.bytes);  // fault in, as a reused arena would be
  double arena_alloc = NowMs() - t;
  t = NowMs();
  ParallelCopy(a.bytes, (const char*)pinned, d.bytes);
  double to_arena = NowMs() - t;
  t = NowMs();
  CU(cuMemcpyDtoH(a.bytes, d.va, d.bytes));
  double d2h_pageable = NowMs() - t;
  char reg[64] = "ok";
  double d2h_registered = 0;
  CUresult r = cuMemHostRegister(a.bytes, d.bytes, 0);
  if (r == CUDA_SUCCESS) {
    t = NowMs();
    CU(cuMemcpyDtoH(a.bytes, d.va, d.bytes));
    d2h_registered = Gbps(d.bytes, NowMs() - t);
    CU(cuMemHostUnregister(a.bytes));
  } else {
    snprintf(reg, sizeof reg, "err:%d", (int)r);
  }
  t = NowMs();
  CU(cuMemUnmap(d.va, d.bytes));
  CU(cuMemRelease(d.handle));
  double release = NowMs() - t;
  double free_pinned = 0;
  if (keep_pinned) {
    a.pinned = pinned;
  } else {
    t = NowMs();
    CU(cuMemFreeHost(pinned));
    free_pinned = NowMs() - t;
  }
  printf("stage pin_alloc_ms=%.1f d2h_pinned_gbps=%.1f arena_alloc_ms=%.1f pinned_to_arena_gbps=%.1f "
         "d2h_pageable_gbps=%.1f register=%s d2h_registered_gbps=%.1f unmap_release_ms=%.1f "
         "free_pinned_ms=%.1f staged_ms=%.1f pinned_path_ms=%.1f\n",
         pin_alloc, Gbps(d.bytes, d2h_pinned), arena_alloc, Gbps(d.bytes, to_arena),
         Gbps(d.bytes, d2h_pageable), reg, d2h_registered, release, free_pinned, NowMs() - t0,
         pin_alloc + d2h_pinned + to_arena + release + free_pinned);
  fflush(stdout);
  return a;
}

// Physical memory mapped again at the kept reservation, the arena copied up, the pattern
// checked where the workload's pointers expect it.
static void Unstage(Device& d, Arena& a) {
  double t0 = NowMs(), t;
  CUdeviceptr before = d.va;
  MapPhysical(d);
  double map = NowMs() - t0;
  t = NowMs();
  CU(cuMemcpyHtoD(d.va, a.bytes, d.bytes));
  double h2d = NowMs() - t;
  unsigned long long bad = Mismatches(d);
  printf("unstage map_ms=%.1f same_va=%s h2d_pageable_gbps=%.1f verify %s mismatches=%llu unstaged_ms=%.1f\n",
         map, d.va == before ? "yes" : "no", Gbps(d.bytes, h2d), bad == 0 ? "ok" : "FAILED", bad,
         NowMs() - t0);
  fflush(stdout);
  munmap(a.bytes, a.size);
  if (a.pinned != nullptr) CU(cuMemFreeHost(a.pinned));
  a = Arena{};
}

// The plain path's check after a restore: the memory never left the device's mapping.
static void CheckInPlace(const Device& d, CUdeviceptr expected) {
  unsigned long long bad = Mismatches(d);
  printf("check same_va=%s verify %s mismatches=%llu\n", d.va == expected ? "yes" : "no",
         bad == 0 ? "ok" : "FAILED", bad);
  fflush(stdout);
}

int main(int argc, char** argv) {
  long gib = 0;
  bool cycle = false, keep_pinned = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--gib") == 0 && i + 1 < argc) gib = atol(argv[++i]);
    else if (strcmp(argv[i], "--cycle") == 0) cycle = true;
    else if (strcmp(argv[i], "--keep-pinned") == 0) keep_pinned = true;
  }
  if (gib < 1) {
    fprintf(stderr, "usage: fast_snapshot_probe --gib N [--cycle] [--keep-pinned]\n");
    return 2;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = OnSignal;
  sigaction(SIGUSR1, &sa, nullptr);
  sigaction(SIGUSR2, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  RT(cudaFree(0));  // the primary context, current for the driver calls below
  Device d = Allocate((size_t)gib << 30);
  Fill<<<1024, 256>>>((uint32_t*)d.va, d.bytes / 4, kSeed);
  RT(cudaDeviceSynchronize());
  printf("ready pid=%d gib=%ld va=0x%llx\n", (int)getpid(), gib, (unsigned long long)d.va);
  fflush(stdout);
  const CUdeviceptr first_va = d.va;
  Arena arena;
  if (cycle) {
    arena = Stage(d, keep_pinned);
    Unstage(d, arena);
    g_stop = 1;
  }
  while (!g_stop) {
    if (g_stage && arena.bytes == nullptr) arena = Stage(d, keep_pinned);
    if (g_unstage && arena.bytes != nullptr) {
      Unstage(d, arena);
    } else if (g_unstage) {
      CheckInPlace(d, first_va);
    }
    g_stage = g_unstage = 0;
    usleep(20000);
  }
  printf("exit clean\n");
  return 0;
}
