// tests/gpu/workload.cu's protocol through the CUDA driver API alone, in plain C, so that it can
// be built against an old C library (hack/gpu-e2e-old-glibc.sh builds it in a Debian 11 root):
// a program nvcc links on a newer machine needs that machine's glibc. libcuda.so.1 is loaded
// with dlopen and the kernels come from a cubin (tests/gpu/workload_kernels.cu, built by nvcc on
// the GPU machine), so no CUDA header or library is needed to build it.
//
// Output and signals as workload.cu: "ready pid=P gib=N", "tick T", "verify ok|FAILED
// mismatches=M gib=N" after SIGUSR1, "exit clean" after SIGTERM.
//
// Usage: workload_driver_api --cubin PATH --gib N [--seed S]
#define _POSIX_C_SOURCE 200809L

#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void* CUcontext;
typedef void* CUmodule;
typedef void* CUfunction;

// The entry points used, by the names the driver has exported since CUDA 4 (the _v2 ABIs).
static struct {
  CUresult (*Init)(unsigned);
  CUresult (*DeviceGet)(int*, int);
  CUresult (*PrimaryCtxRetain)(CUcontext*, int);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*MemAlloc)(CUdeviceptr*, size_t);
  CUresult (*MemAllocHost)(void**, size_t);
  CUresult (*MemsetD8)(CUdeviceptr, unsigned char, size_t);
  CUresult (*MemcpyDtoH)(void*, CUdeviceptr, size_t);
  CUresult (*ModuleLoadData)(CUmodule*, const void*);
  CUresult (*ModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, unsigned, void*, void**, void**);
  CUresult (*CtxSynchronize)(void);
  CUresult (*GetErrorString)(CUresult, const char**);
} cu;

static volatile sig_atomic_t g_verify = 0, g_stop = 0;

static void OnSignal(int sig) {
  if (sig == SIGUSR1) g_verify = 1;
  if (sig == SIGTERM || sig == SIGINT) g_stop = 1;
}

static void Check(CUresult r, const char* what) {
  if (r == 0) return;
  const char* text = "unknown error";
  if (cu.GetErrorString != NULL) cu.GetErrorString(r, &text);
  fprintf(stderr, "workload: %s failed: %s (CUresult %d)\n", what, text, r);
  exit(1);
}

static void* Symbol(void* lib, const char* name) {
  void* f = dlsym(lib, name);
  if (f == NULL) {
    fprintf(stderr, "workload: libcuda.so.1 has no %s\n", name);
    exit(1);
  }
  return f;
}

static void LoadDriver(void) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "workload: cannot load libcuda.so.1: %s\n", dlerror());
    exit(1);
  }
  *(void**)&cu.Init = Symbol(lib, "cuInit");
  *(void**)&cu.DeviceGet = Symbol(lib, "cuDeviceGet");
  *(void**)&cu.PrimaryCtxRetain = Symbol(lib, "cuDevicePrimaryCtxRetain");
  *(void**)&cu.CtxSetCurrent = Symbol(lib, "cuCtxSetCurrent");
  *(void**)&cu.MemAlloc = Symbol(lib, "cuMemAlloc_v2");
  *(void**)&cu.MemAllocHost = Symbol(lib, "cuMemAllocHost_v2");
  *(void**)&cu.MemsetD8 = Symbol(lib, "cuMemsetD8_v2");
  *(void**)&cu.MemcpyDtoH = Symbol(lib, "cuMemcpyDtoH_v2");
  *(void**)&cu.ModuleLoadData = Symbol(lib, "cuModuleLoadData");
  *(void**)&cu.ModuleGetFunction = Symbol(lib, "cuModuleGetFunction");
  *(void**)&cu.LaunchKernel = Symbol(lib, "cuLaunchKernel");
  *(void**)&cu.CtxSynchronize = Symbol(lib, "cuCtxSynchronize");
  *(void**)&cu.GetErrorString = Symbol(lib, "cuGetErrorString");
}

static void* ReadWhole(const char* path) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) {
    fprintf(stderr, "workload: cannot open %s\n", path);
    exit(1);
  }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* data = malloc((size_t)size + 1);
  if (data == NULL || fread(data, 1, (size_t)size, f) != (size_t)size) {
    fprintf(stderr, "workload: cannot read %s\n", path);
    exit(1);
  }
  data[size] = '\0';
  fclose(f);
  return data;
}

static CUfunction Kernel(CUmodule module, const char* name) {
  CUfunction f;
  Check(cu.ModuleGetFunction(&f, module, name), name);
  return f;
}

static void Launch(CUfunction f, unsigned blocks, unsigned threads, void** args, const char* what) {
  Check(cu.LaunchKernel(f, blocks, 1, 1, threads, 1, 1, 0, NULL, args, NULL), what);
}

int main(int argc, char** argv) {
  long gib = 0;
  uint32_t seed = 0x5717A515u;
  const char* cubin = NULL;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--gib") == 0) gib = atol(argv[i + 1]);
    else if (strcmp(argv[i], "--seed") == 0) seed = (uint32_t)strtoul(argv[i + 1], NULL, 0);
    else if (strcmp(argv[i], "--cubin") == 0) cubin = argv[i + 1];
  }
  if (gib < 1 || cubin == NULL) {
    fprintf(stderr, "usage: workload_driver_api --cubin PATH --gib N [--seed S]\n");
    return 2;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = OnSignal;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  setvbuf(stdout, NULL, _IOLBF, 0);

  LoadDriver();
  int device;
  CUcontext ctx;
  CUmodule module;
  Check(cu.Init(0), "cuInit");
  Check(cu.DeviceGet(&device, 0), "cuDeviceGet");
  Check(cu.PrimaryCtxRetain(&ctx, device), "cuDevicePrimaryCtxRetain");
  Check(cu.CtxSetCurrent(ctx), "cuCtxSetCurrent");
  Check(cu.ModuleLoadData(&module, ReadWhole(cubin)), "cuModuleLoadData");
  CUfunction fill = Kernel(module, "Fill"), verify = Kernel(module, "Verify"),
             tick = Kernel(module, "Tick");

  uint64_t words = ((uint64_t)gib << 30) / sizeof(uint32_t);
  const unsigned blocks = 132 * 16, threads = 256;  // H200: 132 SMs
  CUdeviceptr buf, counter, mismatches;
  unsigned long long* host;
  Check(cu.MemAlloc(&buf, words * sizeof(uint32_t)), "cuMemAlloc");
  Check(cu.MemAlloc(&counter, sizeof *host), "cuMemAlloc");
  Check(cu.MemAlloc(&mismatches, sizeof *host), "cuMemAlloc");
  Check(cu.MemsetD8(counter, 0, sizeof *host), "cuMemsetD8");
  // Pinned: host memory the driver knows about must survive the checkpoint too.
  Check(cu.MemAllocHost((void**)&host, sizeof *host), "cuMemAllocHost");
  void* fill_args[] = {&buf, &words, &seed};
  Launch(fill, blocks, threads, fill_args, "Fill");
  Check(cu.CtxSynchronize(), "cuCtxSynchronize");
  printf("ready pid=%d gib=%ld\n", (int)getpid(), gib);

  const struct timespec period = {0, 50 * 1000 * 1000};
  void* tick_args[] = {&counter};
  void* verify_args[] = {&buf, &words, &seed, &mismatches};
  while (!g_stop) {
    if (g_verify) {
      g_verify = 0;
      Check(cu.MemsetD8(mismatches, 0, sizeof *host), "cuMemsetD8");
      Launch(verify, blocks, threads, verify_args, "Verify");
      Check(cu.MemcpyDtoH(host, mismatches, sizeof *host), "cuMemcpyDtoH");
      printf("verify %s mismatches=%llu gib=%ld\n", *host == 0 ? "ok" : "FAILED", *host, gib);
    }
    // While the process is checkpointed these calls block inside the driver: the ticks stop.
    Launch(tick, 1, 1, tick_args, "Tick");
    Check(cu.MemcpyDtoH(host, counter, sizeof *host), "cuMemcpyDtoH");
    printf("tick %llu\n", *host);
    nanosleep(&period, NULL);
  }
  printf("exit clean\n");
  return 0;
}
