// The workload's kernels, shared by tests/gpu/workload.cu (the CUDA runtime program) and
// tests/gpu/workload_kernels.cu (compiled alone to a cubin for tests/gpu/workload_driver_api.c,
// the driver-API program built for older C libraries). extern "C": the driver-API program
// finds them by their plain names.
#pragma once

#include <stdint.h>

// A position-dependent word, so a restore that moved, zeroed or shuffled pages is caught.
__device__ __forceinline__ uint32_t Pattern(uint64_t i, uint32_t seed) {
  uint32_t x = (uint32_t)i ^ ((uint32_t)(i >> 32) * 0x9E3779B1u) ^ seed;
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

extern "C" __global__ void Fill(uint32_t* buf, uint64_t words, uint32_t seed) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < words;
       i += (uint64_t)gridDim.x * blockDim.x) {
    buf[i] = Pattern(i, seed);
  }
}

extern "C" __global__ void Verify(const uint32_t* buf, uint64_t words, uint32_t seed,
                                  unsigned long long* mismatches) {
  unsigned long long bad = 0;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < words;
       i += (uint64_t)gridDim.x * blockDim.x) {
    bad += buf[i] != Pattern(i, seed);
  }
  if (bad != 0) atomicAdd(mismatches, bad);
}

extern "C" __global__ void Tick(unsigned long long* counter) { *counter += 1; }

// Busy for `ns` nanoseconds of GPU time: in-flight work that a lock has to wait for.
extern "C" __global__ void Spin(uint64_t ns) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}
