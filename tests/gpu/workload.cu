// The GPU workload of hack/gpu-helper-proof.sh: holds N GiB of device memory filled with a
// known pattern and ticks a kernel every 50 ms, so a checkpoint/restore by
// stasis-cuda-checkpoint can be seen to (1) stop the ticks while checkpointed, (2) bring
// back the exact bytes (the pattern verifies) and (3) let the ticks continue from the
// counter kept in device memory.
//
// Output, one line each, on stdout: "ready pid=P gib=N", "tick T" (T counts kernel runs; it
// lives in device memory, so it survives only a faithful restore), "verify ok|FAILED
// mismatches=M gib=N" after SIGUSR1, "spin launched ms=S" after SIGUSR2 (a kernel that keeps
// the GPU busy for S ms, to test the lock timeout), "exit clean" after SIGTERM. With --graph 1
// each tick is one launch of a CUDA graph captured at start (the kernel and the copy of the
// counter back): the graph holds the device addresses it was captured with, so it runs after a
// restore only if every allocation came back where it was.
//
// Usage: workload --gib N [--seed S] [--spin-ms S] [--graph 1]
#include <cuda_runtime.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "workload_kernels.cuh"

static volatile sig_atomic_t g_verify = 0, g_spin = 0, g_stop = 0;

static void OnSignal(int sig) {
  if (sig == SIGUSR1) g_verify = 1;
  if (sig == SIGUSR2) g_spin = 1;
  if (sig == SIGTERM || sig == SIGINT) g_stop = 1;
}

#define CHECK(call)                                                                  \
  do {                                                                               \
    cudaError_t err_ = (call);                                                       \
    if (err_ != cudaSuccess) {                                                       \
      fprintf(stderr, "workload: %s failed: %s\n", #call, cudaGetErrorString(err_)); \
      exit(1);                                                                       \
    }                                                                                \
  } while (0)

int main(int argc, char** argv) {
  long gib = 0, spin_ms = 5000, graph = 0;
  uint32_t seed = 0x5717A515u;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--gib") == 0)
      gib = atol(argv[i + 1]);
    else if (strcmp(argv[i], "--seed") == 0)
      seed = (uint32_t)strtoul(argv[i + 1], NULL, 0);
    else if (strcmp(argv[i], "--spin-ms") == 0)
      spin_ms = atol(argv[i + 1]);
    else if (strcmp(argv[i], "--graph") == 0)
      graph = atol(argv[i + 1]);
  }
  if (gib < 1) {
    fprintf(stderr, "usage: workload --gib N [--seed S] [--spin-ms S] [--graph 1]\n");
    return 2;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = OnSignal;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, NULL);
  sigaction(SIGUSR2, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  setvbuf(stdout, NULL, _IOLBF, 0);

  const uint64_t words = ((uint64_t)gib << 30) / sizeof(uint32_t);
  const int blocks = 132 * 16, threads = 256;  // H200: 132 SMs
  uint32_t* buf;
  unsigned long long *counter, *mismatches, *host;
  CHECK(cudaMalloc(&buf, words * sizeof(uint32_t)));
  CHECK(cudaMalloc(&counter, sizeof *counter));
  CHECK(cudaMalloc(&mismatches, sizeof *mismatches));
  CHECK(cudaMemset(counter, 0, sizeof *counter));
  // Pinned: host memory the driver knows about must survive the checkpoint too.
  CHECK(cudaMallocHost(&host, sizeof *host));
  Fill<<<blocks, threads>>>(buf, words, seed);
  CHECK(cudaDeviceSynchronize());
  cudaStream_t stream;
  cudaGraphExec_t tick_graph = NULL;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  if (graph) {
    cudaGraph_t g;
    CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    Tick<<<1, 1, 0, stream>>>(counter);
    CHECK(cudaMemcpyAsync(host, counter, sizeof *host, cudaMemcpyDeviceToHost, stream));
    CHECK(cudaStreamEndCapture(stream, &g));
    CHECK(cudaGraphInstantiate(&tick_graph, g, 0));
    CHECK(cudaGraphDestroy(g));
  }
  printf("ready pid=%d gib=%ld graph=%ld\n", (int)getpid(), gib, graph);

  const struct timespec period = {0, 50 * 1000 * 1000};
  while (!g_stop) {
    if (g_verify) {
      g_verify = 0;
      CHECK(cudaMemset(mismatches, 0, sizeof *mismatches));
      Verify<<<blocks, threads>>>(buf, words, seed, mismatches);
      CHECK(cudaMemcpy(host, mismatches, sizeof *host, cudaMemcpyDeviceToHost));
      printf("verify %s mismatches=%llu gib=%ld\n", *host == 0 ? "ok" : "FAILED", *host, gib);
    }
    if (g_spin) {
      g_spin = 0;
      Spin<<<1, 1>>>((uint64_t)spin_ms * 1000000ull);
      CHECK(cudaGetLastError());
      printf("spin launched ms=%ld\n", spin_ms);
    }
    // While the process is checkpointed these calls block inside the driver: the ticks stop.
    if (tick_graph) {
      CHECK(cudaGraphLaunch(tick_graph, stream));
      CHECK(cudaStreamSynchronize(stream));
    } else {
      Tick<<<1, 1>>>(counter);
      CHECK(cudaMemcpy(host, counter, sizeof *host, cudaMemcpyDeviceToHost));
    }
    printf("tick %llu\n", *host);
    nanosleep(&period, NULL);
  }
  if (tick_graph) CHECK(cudaGraphExecDestroy(tick_graph));
  CHECK(cudaStreamDestroy(stream));
  CHECK(cudaFree(buf));
  CHECK(cudaFree(counter));
  CHECK(cudaFree(mismatches));
  CHECK(cudaFreeHost(host));
  printf("exit clean\n");
  return 0;
}
