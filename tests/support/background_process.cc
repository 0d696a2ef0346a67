#include "tests/support/background_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace stasis::testing {

BackgroundProcess::BackgroundProcess(const std::vector<std::string>& argv,
                                     const std::string& log_path,
                                     const std::vector<std::string>& extra_env)
    : log_path_(log_path) {
  if (argv.empty()) {
    std::fprintf(stderr, "BackgroundProcess: empty argv\n");
    std::abort();
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_store;
  for (char** e = environ; *e; ++e) env_store.emplace_back(*e);
  for (const auto& e : extra_env) env_store.push_back(e);
  std::vector<char*> envp;
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);

  const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (log < 0 || devnull < 0) {
    std::fprintf(stderr, "BackgroundProcess: open %s: %s\n", log_path.c_str(), std::strerror(errno));
    std::abort();
  }
  pid_ = fork();
  if (pid_ < 0) {
    std::perror("fork");
    std::abort();
  }
  if (pid_ == 0) {
    setpgid(0, 0);
    dup2(devnull, 0);
    dup2(log, 1);
    dup2(log, 2);
    signal(SIGPIPE, SIG_DFL);
    execvpe(args[0], args.data(), envp.data());
    const char msg[] = "BackgroundProcess: exec failed\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(127);
  }
  setpgid(pid_, pid_);  // whichever of parent and child runs first: never our own group
  close(log);
  close(devnull);
}

BackgroundProcess::~BackgroundProcess() {
  if (!status_) {
    KillGroup(SIGKILL);
    Wait(std::chrono::seconds(30));
  }
}

void BackgroundProcess::Kill(int signal) {
  if (!status_ && pid_ > 0) kill(pid_, signal);
}

void BackgroundProcess::KillGroup(int signal) {
  if (pid_ > 0) kill(-pid_, signal);
}

std::optional<int> BackgroundProcess::Wait(std::chrono::milliseconds deadline) {
  if (status_) return status_;
  const auto end = std::chrono::steady_clock::now() + deadline;
  for (;;) {
    int st = 0;
    const pid_t r = waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      status_ = st;
      return status_;
    }
    if (r < 0 && errno != EINTR) {
      status_ = -1;  // not our child any more (cannot happen): treat as gone
      return status_;
    }
    if (std::chrono::steady_clock::now() >= end) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool BackgroundProcess::Running() { return !Wait(std::chrono::milliseconds(0)).has_value(); }

int BackgroundProcess::Stop(std::chrono::milliseconds grace) {
  if (status_) return *status_;
  Kill(SIGTERM);
  if (auto st = Wait(grace)) return *st;
  KillGroup(SIGKILL);
  return Wait(std::chrono::seconds(30)).value_or(-1);
}

std::string BackgroundProcess::Log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string BackgroundProcess::LogTail(size_t bytes) const {
  std::string s = Log();
  if (s.size() > bytes) s = "…" + s.substr(s.size() - bytes);
  return s;
}

}  // namespace stasis::testing
