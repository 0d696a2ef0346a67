// Pinned host<->device copy bandwidth, measured in the same run as the checkpoint timings of
// hack/gpu-helper-proof.sh so that checkpoint/restore GB/s can be read against the PCIe
// ceiling of that very machine.
//
// Prints one line: "h2d_best=GB/s h2d_median=GB/s d2h_best=GB/s d2h_median=GB/s gib=N reps=R"
// (GB = 1e9 bytes). Usage: copy_bandwidth [--gib N] [--reps R]
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#define CHECK(call)                                                                        \
  do {                                                                                     \
    cudaError_t err_ = (call);                                                             \
    if (err_ != cudaSuccess) {                                                             \
      fprintf(stderr, "copy_bandwidth: %s failed: %s\n", #call, cudaGetErrorString(err_)); \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

// Seconds per copy of `bytes` in direction `kind`, one entry per repetition.
static std::vector<float> Time(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                               int reps) {
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaMemcpy(dst, src, bytes, kind));  // warm-up: page tables, clocks
  std::vector<float> seconds;
  for (int r = 0; r < reps; r++) {
    CHECK(cudaEventRecord(start));
    CHECK(cudaMemcpyAsync(dst, src, bytes, kind));
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    seconds.push_back(ms / 1000.0f);
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds;
}

int main(int argc, char** argv) {
  long gib = 4;
  int reps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--gib") == 0) gib = atol(argv[i + 1]);
    if (strcmp(argv[i], "--reps") == 0) reps = atoi(argv[i + 1]);
  }
  const size_t bytes = (size_t)gib << 30;
  void *host, *device;
  CHECK(cudaMallocHost(&host, bytes));
  CHECK(cudaMalloc(&device, bytes));
  memset(host, 0x5a, bytes);  // fault every page in before timing
  std::vector<float> h2d = Time(device, host, bytes, cudaMemcpyHostToDevice, reps);
  std::vector<float> d2h = Time(host, device, bytes, cudaMemcpyDeviceToHost, reps);
  auto gbps = [bytes](float s) { return bytes / 1e9 / s; };
  printf("h2d_best=%.1f h2d_median=%.1f d2h_best=%.1f d2h_median=%.1f gib=%ld reps=%d\n",
         gbps(h2d.front()), gbps(h2d[h2d.size() / 2]), gbps(d2h.front()), gbps(d2h[d2h.size() / 2]),
         gib, reps);
  CHECK(cudaFree(device));
  CHECK(cudaFreeHost(host));
  return 0;
}
