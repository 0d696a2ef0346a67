// Parses the cuda-checkpoint command line by hand rather than with getopt_long: the rules
// (one command, --timeout only where a lock happens) and the messages stay in one place.
#include "args.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char kHelpText[] =
    "stasis-cuda-checkpoint: checkpoint and restore the CUDA state of a running process\n"
    "(command-line compatible with NVIDIA's cuda-checkpoint; needs NVIDIA driver R570 or newer)\n"
    "\n"
    "Usage:\n"
    "  stasis-cuda-checkpoint --get-state --pid <pid>\n"
    "      print the process's CUDA state: running, locked, checkpointed or failed\n"
    "  stasis-cuda-checkpoint --toggle --pid <pid> [--timeout <ms>]\n"
    "      running -> lock + checkpoint (GPU memory moved to host memory, GPU released);\n"
    "      checkpointed -> restore + unlock\n"
    "  stasis-cuda-checkpoint --action lock|checkpoint|restore|unlock --pid <pid>\n"
    "                         [--timeout <ms>]\n"
    "      one step: lock (running -> locked), checkpoint (locked -> checkpointed),\n"
    "      restore (checkpointed -> locked), unlock (locked -> running)\n"
    "  stasis-cuda-checkpoint --get-restore-tid --pid <pid>\n"
    "      print the ID of the thread that restore runs on\n"
    "  stasis-cuda-checkpoint --help\n"
    "\n"
    "Options:\n"
    "  --pid, -p <pid>       the target process (a thread ID works too)\n"
    "  --timeout, -t <ms>    lock and toggle only: how long the lock waits for submitted GPU\n"
    "                        work; default 30000; 0 waits forever. A lock that times out\n"
    "                        leaves the process running (exit status 3).\n"
    "  --device-map, -d <old>=<new>[,<old>=<new>...]\n"
    "                        --action restore and --toggle (when it restores) only: restore\n"
    "                        the device memory of GPU <old> onto GPU <new>, both UUIDs as\n"
    "                        nvidia-smi -L prints them (GPU-...); name every checkpointed GPU.\n"
    "                        Needs driver R580 or newer.\n"
    "  --fast-snapshot-timeout-ms <ms>\n"
    "                        --toggle only: how long each exchange with a process that preloads\n"
    "                        libstasis-fastsnap.so may take (default 60000). Such a process\n"
    "                        stages its device memory into pinned host memory before the lock\n"
    "                        and puts it back after the unlock; a process without the library\n"
    "                        gets the plain toggle. Lines on stderr: \"fast-snapshot: staged\n"
    "                        <bytes> bytes in <ms> ms\", \"fast-snapshot: unstaged ...\" or\n"
    "                        \"fast-snapshot: fallback: <reason>\" (the plain toggle then runs).\n"
    "  --help, -h            this text\n"
    "\n"
    "Exit status: 0 success, 1 a CUDA call failed, 2 bad command line, 3 lock timed out\n"
    "(process still running), 4 libcuda.so.1 not loadable, 255 driver older than R570.\n";

// Accepts decimal digits only (no sign, no spaces, no hex) within [min, max].
static int ParseNumber(const char* text, long long min, long long max, long long* out) {
  if (text[0] < '0' || text[0] > '9') return 0;
  errno = 0;
  char* end = NULL;
  long long value = strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0' || value < min || value > max) return 0;
  *out = value;
  return 1;
}

static int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "GPU-" and a UUID in its 8-4-4-4-12 form, exactly `len` characters, into 16 bytes.
static int ParseGpuUuid(const char* text, size_t len, unsigned char out[16]) {
  static const char kPrefix[] = "GPU-";
  const size_t prefix = sizeof kPrefix - 1;
  if (len != prefix + 36 || strncmp(text, kPrefix, prefix) != 0) return 0;
  const char* u = text + prefix;
  int byte = 0;
  for (int i = 0; i < 36;) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (u[i++] != '-') return 0;
      continue;
    }
    int hi = HexValue(u[i]), lo = HexValue(u[i + 1]);
    if (hi < 0 || lo < 0) return 0;
    out[byte++] = (unsigned char)(hi << 4 | lo);
    i += 2;
  }
  return 1;
}

// "OLD=NEW,OLD=NEW": every pair well formed, no GPU named twice on either side.
static int ParseDeviceMap(const char* text, Args* args, char* why, size_t n) {
  const char* p = text;
  while (1) {
    const char* end = strchr(p, ',');
    const size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
    const char* eq = memchr(p, '=', len);
    if (args->device_map_count == kMaxGpuPairs) {
      snprintf(why, n, "--device-map names more than %d GPUs", kMaxGpuPairs);
      return 0;
    }
    GpuPair* pair = &args->device_map[args->device_map_count];
    if (eq == NULL || !ParseGpuUuid(p, (size_t)(eq - p), pair->old_uuid) ||
        !ParseGpuUuid(eq + 1, len - (size_t)(eq - p) - 1, pair->new_uuid)) {
      snprintf(why, n, "invalid --device-map entry '%.*s' (GPU-<uuid>=GPU-<uuid>)", (int)len, p);
      return 0;
    }
    for (unsigned int i = 0; i < args->device_map_count; i++) {
      if (memcmp(args->device_map[i].old_uuid, pair->old_uuid, 16) == 0 ||
          memcmp(args->device_map[i].new_uuid, pair->new_uuid, 16) == 0) {
        snprintf(why, n, "--device-map names a GPU twice in '%.*s'", (int)len, p);
        return 0;
      }
    }
    args->device_map_count++;
    if (end == NULL) return 1;
    p = end + 1;
  }
}

static int SetCommand(Args* args, Command command, const char* flag, char* why, size_t n) {
  if (args->command != kCommandNone) {
    snprintf(why, n, "%s: only one of --get-state, --toggle, --action, --get-restore-tid", flag);
    return 0;
  }
  args->command = command;
  return 1;
}

// The values once the whole line is read: the command decides which are required or allowed.
static int CheckValues(const char* pid_text, const char* timeout_text, const char* map_text,
                       const char* fast_text, Args* args, char* why, size_t n) {
  if (args->command == kCommandNone) {
    snprintf(why, n,
             "no command given (--get-state, --toggle, --action, --get-restore-tid or --help)");
    return 0;
  }
  if (pid_text == NULL) {
    snprintf(why, n, "--pid is required");
    return 0;
  }
  long long number = 0;
  if (!ParseNumber(pid_text, 1, INT_MAX, &number)) {
    snprintf(why, n, "invalid process ID '%s' (a positive integer)", pid_text);
    return 0;
  }
  args->pid = (int)number;
  if (timeout_text != NULL) {
    // Only lock waits on anything; accepting --timeout elsewhere would suggest it bounds the
    // checkpoint or restore copy, which the driver offers no way to do.
    if (args->command != kCommandLock && args->command != kCommandToggle) {
      snprintf(why, n, "--timeout applies only to --toggle and --action lock");
      return 0;
    }
    if (!ParseNumber(timeout_text, 0, UINT_MAX, &number)) {
      snprintf(why, n, "invalid timeout '%s' (milliseconds, 0 = wait forever)", timeout_text);
      return 0;
    }
    args->timeout_ms = (unsigned int)number;
  }
  if (fast_text != NULL) {
    if (args->command != kCommandToggle) {
      snprintf(why, n, "--fast-snapshot-timeout-ms applies only to --toggle");
      return 0;
    }
    if (!ParseNumber(fast_text, 1, UINT_MAX, &number)) {
      snprintf(why, n, "invalid fast-snapshot timeout '%s' (milliseconds, at least 1)", fast_text);
      return 0;
    }
    args->fast_snapshot_timeout_ms = (unsigned int)number;
  }
  if (map_text != NULL) {
    if (args->command != kCommandRestore && args->command != kCommandToggle) {
      snprintf(why, n, "--device-map applies only to --action restore and --toggle");
      return 0;
    }
    return ParseDeviceMap(map_text, args, why, n);
  }
  return 1;
}

int ParseArgs(int argc, char** argv, Args* args, char* why, size_t n) {
  memset(args, 0, sizeof *args);
  args->timeout_ms = kDefaultLockTimeoutMs;
  args->fast_snapshot_timeout_ms = kDefaultFastSnapshotTimeoutMs;
  const char* pid_text = NULL;
  const char* fast_text = NULL;
  const char* timeout_text = NULL;
  const char* map_text = NULL;

  for (int i = 1; i < argc; i++) {
    const char* arg = argv[i];
    int takes_value = strcmp(arg, "--pid") == 0 || strcmp(arg, "-p") == 0 ||
                      strcmp(arg, "--timeout") == 0 || strcmp(arg, "-t") == 0 ||
                      strcmp(arg, "--action") == 0 || strcmp(arg, "--device-map") == 0 ||
                      strcmp(arg, "-d") == 0 || strcmp(arg, "--fast-snapshot-timeout-ms") == 0;
    const char* value = NULL;
    if (takes_value) {
      if (i + 1 >= argc) {
        snprintf(why, n, "%s needs a value", arg);
        return 0;
      }
      value = argv[++i];
    }

    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      // Help wins over everything else on the line, as in most tools.
      args->command = kCommandHelp;
      return 1;
    } else if (strcmp(arg, "--get-state") == 0) {
      if (!SetCommand(args, kCommandGetState, arg, why, n)) return 0;
    } else if (strcmp(arg, "--toggle") == 0) {
      if (!SetCommand(args, kCommandToggle, arg, why, n)) return 0;
    } else if (strcmp(arg, "--get-restore-tid") == 0) {
      if (!SetCommand(args, kCommandGetRestoreTid, arg, why, n)) return 0;
    } else if (strcmp(arg, "--action") == 0) {
      Command action = strcmp(value, "lock") == 0         ? kCommandLock
                       : strcmp(value, "checkpoint") == 0 ? kCommandCheckpoint
                       : strcmp(value, "restore") == 0    ? kCommandRestore
                       : strcmp(value, "unlock") == 0     ? kCommandUnlock
                                                          : kCommandNone;
      if (action == kCommandNone) {
        snprintf(why, n, "unknown action '%s' (lock, checkpoint, restore or unlock)", value);
        return 0;
      }
      if (!SetCommand(args, action, arg, why, n)) return 0;
    } else if (strcmp(arg, "--pid") == 0 || strcmp(arg, "-p") == 0) {
      pid_text = value;
    } else if (strcmp(arg, "--timeout") == 0 || strcmp(arg, "-t") == 0) {
      timeout_text = value;
    } else if (strcmp(arg, "--device-map") == 0 || strcmp(arg, "-d") == 0) {
      map_text = value;
    } else if (strcmp(arg, "--fast-snapshot-timeout-ms") == 0) {
      fast_text = value;
    } else {
      snprintf(why, n, "unknown argument '%s'; see --help", argv[i]);
      return 0;
    }
  }

  return CheckValues(pid_text, timeout_text, map_text, fast_text, args, why, n);
}
