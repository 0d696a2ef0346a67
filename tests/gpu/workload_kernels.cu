// The workload's kernels alone, for `nvcc -cubin` (hack/gpu-e2e-old-glibc.sh): the cubin the
// driver-API workload (tests/gpu/workload_driver_api.c) loads with cuModuleLoadData.
#include "workload_kernels.cuh"
