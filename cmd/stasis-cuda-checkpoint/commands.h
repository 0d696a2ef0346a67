// Carries out one parsed command against the loaded driver: prints what the command prints
// on stdout, reports a failure as one line on stderr, and returns the exit status.
//
// Toggle follows NVIDIA's tool: running -> lock (with the timeout) + checkpoint;
// checkpointed -> restore + unlock. A checkpoint that fails after a successful lock is
// followed by an unlock, so the process is not left with its CUDA calls blocked.
#pragma once

#include "args.h"
#include "cuda_driver.h"

int RunCheckpointCommand(const CudaDriver* driver, const Args* args);
