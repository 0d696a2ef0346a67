// A long-running child process for tests (a `stasis node` agent, a helper): started by argv in
// its own process group, stdout and stderr appended to a log file, stopped by signal, waited
// for with a deadline. The destructor SIGKILLs the whole group and reaps the child, so a
// failing test leaks no process.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace stasis::testing {

class BackgroundProcess {
 public:
  // Starts argv[0] (searched in PATH when it has no '/') with the environment plus
  // `extra_env` ("NAME=value"). Aborts the test binary when it cannot be started.
  BackgroundProcess(const std::vector<std::string>& argv, const std::string& log_path,
                    const std::vector<std::string>& extra_env = {});
  ~BackgroundProcess();
  BackgroundProcess(const BackgroundProcess&) = delete;
  BackgroundProcess& operator=(const BackgroundProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }

  // Sends `signal` to the child only (a crash of that one process: its own children survive).
  void Kill(int signal);
  // Sends `signal` to the child's whole process group.
  void KillGroup(int signal);
  // Waits until the child exits or `deadline` passes. Returns its wait status (as waitpid
  // gives it), or nullopt when it still runs. Once reaped, later calls return the same status.
  std::optional<int> Wait(std::chrono::milliseconds deadline);
  bool Running();
  // SIGTERM, Wait(grace), then SIGKILL of the group; returns the wait status.
  int Stop(std::chrono::milliseconds grace);

  // The last `bytes` of the log file.
  std::string LogTail(size_t bytes = 4000) const;
  std::string Log() const;

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::string log_path_;
};

}  // namespace stasis::testing
