// Runs an external program the way every stasis command must run: argv only (never a
// shell), a deadline, its own process group (killed as a group when the deadline passes),
// stdout and stderr kept.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace stasis {

struct CommandOptions {
  std::string stdin_data;                  // written to the child's stdin, then closed
  std::optional<std::string> cwd;          // working directory; inherited when empty
  std::vector<std::string> extra_env;      // "NAME=value", added to the environment (replacing NAME)
  // When set, the child's stdout and stderr go to this file (appended) instead of pipes, and
  // what it wrote there is returned in `err`. Needed for programs that leave daemons holding
  // their stdio (runsc run/restore -detach: the sandbox keeps the container's stdio), which
  // would otherwise keep a pipe open until the deadline.
  std::optional<std::string> output_path;
  // Where stdout/stderr stop being kept (the tail is kept): a runaway child cannot eat memory.
  size_t max_output_bytes = 4 << 20;
  // cgroup.procs files the child moves itself into before it execs, so that it and everything
  // it starts live in those cgroups, not in ours. A file that cannot be opened or written fails
  // the command before the program runs (kFailedPrecondition, naming the file).
  std::vector<std::string> join_cgroups;
};

struct CommandResult {
  int exit_code = -1;      // the exit status, or -1 when a signal ended the child
  int term_signal = 0;     // the signal that ended it, or 0
  bool timed_out = false;  // the deadline passed and the group was SIGKILLed
  std::string out;
  std::string err;
  std::chrono::milliseconds duration{0};

  bool success() const { return !timed_out && exit_code == 0; }
  // One line for logs and conditions: "exit 128: checkpoint failed: …" (stderr's last line).
  std::string Summary() const;
};

// Fails (as a value) only when the program could not be started at all: kNotFound when
// argv[0] does not exist or is not executable, kInvalidArgument for an empty argv.
// A non-zero exit, a signal or a timeout is a CommandResult, for the caller to classify.
Result<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                 std::chrono::milliseconds deadline,
                                 const CommandOptions& options = {});

// Whether the host process `pid` is a zombie: dead, waiting for its parent to reap it. A
// sandbox's or VM's process that its parent has not reaped yet still answers kill(pid, 0).
bool IsZombie(long pid);

}  // namespace stasis
