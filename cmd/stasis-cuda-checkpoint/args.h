// The command line of stasis-cuda-checkpoint, compatible with NVIDIA's cuda-checkpoint for
// what runsc and operators use: --get-state, --toggle, --action, --get-restore-tid, --help,
// with --pid/-p and --timeout/-t. Parsing does no I/O and touches no driver, so a bad
// command line is refused before libcuda is ever loaded.
#pragma once

#include <stddef.h>

// Exit statuses (docs/gpu.md). 255 is the one code NVIDIA's tool fixes ("Insufficient
// driver"); the rest let a caller tell "retry later" (3) from "broken" without parsing text.
enum {
  kExitOk = 0,
  kExitCudaError = 1,    // a driver call failed; stderr names it
  kExitUsage = 2,        // the command line is wrong
  kExitLockTimeout = 3,  // lock timed out; the process was left running
  kExitNoDriver = 4,     // libcuda.so.1 could not be loaded
  kExitOldDriver = 255,  // the driver is older than R570
};

// How long a lock waits for the target's submitted GPU work before giving up, leaving the
// process running. Long enough for ordinary kernels and queues; short against the actor's
// checkpoint deadline, so a rank stuck in a collective fails the toggle instead of hanging
// runsc (which runs --toggle with no timeout of its own).
enum { kDefaultLockTimeoutMs = 30000 };

// How long --toggle waits for each exchange with a process that preloads libstasis-fastsnap
// (fastsnap_client.h). A stage copies all of its tracked device memory at ~55 GB/s, but on its
// first run also allocates the pinned arena (~0.5 s/GiB): tens of GiB need tens of seconds.
enum { kDefaultFastSnapshotTimeoutMs = 60000 };

typedef enum {
  kCommandNone = 0,
  kCommandHelp,
  kCommandGetState,
  kCommandToggle,
  kCommandGetRestoreTid,
  kCommandLock,
  kCommandCheckpoint,
  kCommandRestore,
  kCommandUnlock,
} Command;

// --device-map OLD=NEW[,OLD=NEW…] (NVIDIA's R580 option): on a restore, the device memory of
// GPU OLD goes to GPU NEW, each a UUID in nvidia-smi's form (GPU-xxxxxxxx-xxxx-…). The driver
// wants every checkpointed GPU named and a target of the same chip type.
enum { kMaxGpuPairs = 64 };
typedef struct {
  unsigned char old_uuid[16];
  unsigned char new_uuid[16];
} GpuPair;

typedef struct {
  Command command;
  int pid;                  // > 0 for every command but help
  unsigned int timeout_ms;  // for lock and toggle; 0 = wait forever
  unsigned int fast_snapshot_timeout_ms;  // toggle only; >= 1
  GpuPair device_map[kMaxGpuPairs];  // --action restore and --toggle only
  unsigned int device_map_count;     // 0 = restore onto the same GPUs
} Args;

// Fills `args` from argv. Returns 1 on success; 0 with a one-line reason in `why` otherwise.
int ParseArgs(int argc, char** argv, Args* args, char* why, size_t why_size);

// The --help text, printed on stdout.
extern const char kHelpText[];
