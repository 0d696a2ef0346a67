// Carries out one parsed command against the loaded driver: prints what the command prints
// on stdout, reports a failure as one line on stderr, and returns the exit status.
//
// Toggle follows NVIDIA's tool: running -> lock (with the timeout) + checkpoint;
// checkpointed -> restore + unlock. A checkpoint that fails after a successful lock is
// followed by an unlock, so the process is not left with its CUDA calls blocked.
// With a process that preloads libstasis-fastsnap, toggle also stages its device memory before
// the lock and puts it back after the unlock (or after a failed lock or checkpoint);
// fastsnap_client.h.
#pragma once

#include "args.h"
#include "cuda_driver.h"

int RunCheckpointCommand(const CudaDriver* driver, const Args* args);
