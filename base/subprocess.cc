#include "base/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <string_view>
#include <utility>

extern char** environ;

namespace stasis {
namespace {

using Clock = std::chrono::steady_clock;

void AppendBounded(std::string& buf, const char* data, size_t n, size_t limit) {
  buf.append(data, n);
  // Keep the tail: the last lines of stderr are the ones that say why a program failed.
  if (buf.size() > limit) buf.erase(0, buf.size() - limit);
}

void CloseIfOpen(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// The child's argv and environment as execvpe wants them. Built in place and never moved:
// the char pointers point into the strings it holds.
class ExecArgs {
 public:
  ExecArgs(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env) {
    for (const auto& a : argv) args_.push_back(const_cast<char*>(a.c_str()));
    args_.push_back(nullptr);
    // An extra variable replaces ours of the same name: with both in envp, which one a child
    // reads depends on its libc (getenv takes the first), so ours is left out.
    auto name_of = [](std::string_view e) { return e.substr(0, e.find('=')); };
    for (char** e = environ; *e; ++e) {
      const bool replaced = std::any_of(extra_env.begin(), extra_env.end(),
                                        [&](const std::string& x) { return name_of(x) == name_of(*e); });
      if (!replaced) env_store_.emplace_back(*e);
    }
    for (const auto& e : extra_env) env_store_.push_back(e);
    for (auto& e : env_store_) envp_.push_back(e.data());
    envp_.push_back(nullptr);
  }
  ExecArgs(const ExecArgs&) = delete;
  ExecArgs& operator=(const ExecArgs&) = delete;
  char* const* args() { return args_.data(); }
  char* const* envp() { return envp_.data(); }

 private:
  std::vector<char*> args_;
  std::vector<std::string> env_store_;
  std::vector<char*> envp_;
};

// The child's stdin, stdout and stderr, and the pipe its exec failure (an errno) comes back
// on: closed on exec (O_CLOEXEC), so a successful exec reads as end of file.
// Every end not handed over is closed with it, so that no early return (a pipe that could
// not be made, a failed fork or exec) leaks descriptors.
struct Pipes {
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, exec[2] = {-1, -1};
  Pipes() = default;
  Pipes(const Pipes&) = delete;
  Pipes& operator=(const Pipes&) = delete;
  ~Pipes() {
    for (int* fd : {&in[0], &in[1], &out[0], &out[1], &err[0], &err[1], &exec[0], &exec[1]}) {
      CloseIfOpen(*fd);
    }
  }
};

Status MakePipes(Pipes& p) {
  if (pipe2(p.in, O_CLOEXEC) != 0) return Status(Code::kInternal, "pipe: " + std::string(std::strerror(errno)));
  if (pipe2(p.out, O_CLOEXEC) != 0 || pipe2(p.err, O_CLOEXEC) != 0 ||
      pipe2(p.exec, O_CLOEXEC) != 0) {
    return Status(Code::kInternal, "pipe: " + std::string(std::strerror(errno)));
  }
  return OkStatus();
}

// options.output_path opened for appending, and where this command's output will start.
// Closed with it, as the pipes are.
struct OutputFile {
  int fd = -1;
  off_t start = 0;
  OutputFile() = default;
  OutputFile(OutputFile&& o) noexcept : fd(std::exchange(o.fd, -1)), start(o.start) {}
  OutputFile& operator=(OutputFile&& o) noexcept {
    if (this != &o) {
      CloseIfOpen(fd);
      fd = std::exchange(o.fd, -1);
      start = o.start;
    }
    return *this;
  }
  ~OutputFile() { CloseIfOpen(fd); }
};

Result<OutputFile> OpenOutputFile(const CommandOptions& options) {
  OutputFile file;
  if (!options.output_path) return file;
  file.fd = open(options.output_path->c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (file.fd < 0) {
    return Status(Code::kFailedPrecondition, *options.output_path + ": " + std::strerror(errno));
  }
  file.start = lseek(file.fd, 0, SEEK_END);
  return file;
}

// options.join_cgroups opened for writing in the parent (a path that cannot be opened is an
// error here, with its name); the child writes to them. Closed with it.
struct CgroupFiles {
  std::vector<int> fds;
  CgroupFiles() = default;
  CgroupFiles(CgroupFiles&& o) noexcept : fds(std::move(o.fds)) { o.fds.clear(); }
  CgroupFiles(const CgroupFiles&) = delete;
  ~CgroupFiles() {
    for (int& fd : fds) CloseIfOpen(fd);
  }
};

Result<CgroupFiles> OpenCgroupFiles(const CommandOptions& options) {
  CgroupFiles files;
  for (const auto& path : options.join_cgroups) {
    const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return Status(Code::kFailedPrecondition, "joining cgroup " + path + ": " + std::strerror(errno));
    files.fds.push_back(fd);
  }
  return files;
}

// What the child sends back when it cannot exec: at which step (0: the exec itself; k > 0:
// joining the k-th cgroup) and the errno.
struct ChildFailure {
  int step = 0;
  int error = 0;
};

// The forked child: only async-signal-safe calls from here on.
[[noreturn]] void ExecChild(const Pipes& p, int out_file, const CommandOptions& options,
                            const CgroupFiles& cgroups, ExecArgs& exec_args) {
  setpgid(0, 0);  // its own process group, so a timeout kills everything it started
  dup2(p.in[0], 0);
  dup2(out_file >= 0 ? out_file : p.out[1], 1);
  dup2(out_file >= 0 ? out_file : p.err[1], 2);
  signal(SIGPIPE, SIG_DFL);
  ChildFailure failure;
  for (size_t i = 0; i < cgroups.fds.size() && failure.step == 0; ++i) {
    // "0": the writing process itself.
    if (write(cgroups.fds[i], "0\n", 2) != 2) failure = {static_cast<int>(i) + 1, errno};
  }
  if (failure.step == 0 && (!options.cwd || chdir(options.cwd->c_str()) == 0)) {
    execvpe(exec_args.args()[0], exec_args.args(), exec_args.envp());
  }
  if (failure.step == 0) failure.error = errno;
  (void)!write(p.exec[1], &failure, sizeof failure);
  _exit(127);
}

// In the parent: closes the child's ends and waits for its exec. An exec that failed is
// reaped and returned as a Status.
Status AwaitExec(pid_t pid, Pipes& p, const std::string& program, const CommandOptions& options) {
  CloseIfOpen(p.in[0]);
  CloseIfOpen(p.out[1]);
  CloseIfOpen(p.err[1]);
  CloseIfOpen(p.exec[1]);
  ChildFailure f;
  const bool failed = read(p.exec[0], &f, sizeof f) == sizeof f;
  CloseIfOpen(p.exec[0]);
  if (!failed) return OkStatus();
  waitpid(pid, nullptr, 0);
  if (f.step > 0) {
    return Status(Code::kFailedPrecondition,
                  "joining cgroup " + options.join_cgroups[f.step - 1] + ": " + std::strerror(f.error));
  }
  return Status(f.error == ENOENT || f.error == EACCES ? Code::kNotFound : Code::kInternal,
                program + ": " + std::strerror(f.error));
}

// The parent's ends of the child's stdio; -1 once closed.
struct ChildIo {
  int stdin_fd = -1, stdout_fd = -1, stderr_fd = -1;
  bool open() const { return stdout_fd >= 0 || stderr_fd >= 0 || stdin_fd >= 0; }
};

// One poll round: reads what stdout and stderr have, writes what stdin takes.
void PumpOnce(ChildIo& io, pollfd* fds, int idx_out, int idx_err, int idx_in,
              const CommandOptions& options, size_t& stdin_off, CommandResult& result) {
  char buf[65536];
  auto drain = [&](int idx, int& fd, std::string& into) {
    if (idx < 0 || !(fds[idx].revents & (POLLIN | POLLHUP | POLLERR))) return;
    ssize_t got = read(fd, buf, sizeof buf);
    if (got > 0) AppendBounded(into, buf, static_cast<size_t>(got), options.max_output_bytes);
    else if (got == 0 || (errno != EINTR && errno != EAGAIN)) CloseIfOpen(fd);
  };
  drain(idx_out, io.stdout_fd, result.out);
  drain(idx_err, io.stderr_fd, result.err);
  if (idx_in >= 0 && (fds[idx_in].revents & (POLLOUT | POLLERR | POLLHUP))) {
    ssize_t put = write(io.stdin_fd, options.stdin_data.data() + stdin_off,
                        options.stdin_data.size() - stdin_off);
    if (put > 0) stdin_off += static_cast<size_t>(put);
    if (put < 0 && errno != EAGAIN && errno != EINTR) CloseIfOpen(io.stdin_fd);
    if (stdin_off == options.stdin_data.size()) CloseIfOpen(io.stdin_fd);
  }
}

// Feeds stdin and collects stdout and stderr until all are closed or `end` passes (then
// result.timed_out).
void PumpIo(ChildIo& io, const CommandOptions& options, Clock::time_point end,
            CommandResult& result) {
  size_t stdin_off = 0;
  while (io.open()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      break;
    }
    pollfd fds[3];
    int n = 0;
    int idx_out = -1, idx_err = -1, idx_in = -1;
    if (io.stdout_fd >= 0) { idx_out = n; fds[n++] = {io.stdout_fd, POLLIN, 0}; }
    if (io.stderr_fd >= 0) { idx_err = n; fds[n++] = {io.stderr_fd, POLLIN, 0}; }
    if (io.stdin_fd >= 0) { idx_in = n; fds[n++] = {io.stdin_fd, POLLOUT, 0}; }
    int r = poll(fds, n, static_cast<int>(std::min<long>(left.count(), 1000)));
    if (r < 0 && errno != EINTR) break;
    if (r <= 0) continue;
    PumpOnce(io, fds, idx_out, idx_err, idx_in, options, stdin_off, result);
  }
  CloseIfOpen(io.stdin_fd);
}

// Reaps the child; SIGKILLs its group when the deadline passed or passes meanwhile. Returns
// its wait status.
int WaitForExit(pid_t pid, Clock::time_point end, CommandResult& result) {
  int status = 0;
  if (result.timed_out) {
    kill(-pid, SIGKILL);
    waitpid(pid, &status, 0);
  } else {
    // Output closed; the child may still be exiting (or ignoring its closed pipes). Wait out
    // the rest of the deadline for it.
    while (true) {
      pid_t w = waitpid(pid, &status, WNOHANG);
      if (w == pid) break;
      if (w < 0 && errno != EINTR) break;
      if (Clock::now() >= end) {
        result.timed_out = true;
        kill(-pid, SIGKILL);
        waitpid(pid, &status, 0);
        break;
      }
      usleep(2000);
    }
  }
  // Grandchildren that kept running in the group after the leader exited must not outlive
  // the command either (a daemonising child that was told to stay in the foreground).
  if (result.timed_out) kill(-pid, SIGKILL);
  return status;
}

// What the command appended to options.output_path (its tail), into result.err.
void ReadOutputFile(const CommandOptions& options, OutputFile& file, CommandResult& result) {
  CloseIfOpen(file.fd);
  int rd = open(options.output_path->c_str(), O_RDONLY | O_CLOEXEC);
  if (rd < 0) return;
  off_t size = lseek(rd, 0, SEEK_END);
  off_t from = std::max<off_t>(file.start, size - static_cast<off_t>(options.max_output_bytes));
  lseek(rd, from, SEEK_SET);
  char buf[65536];
  ssize_t got;
  while ((got = read(rd, buf, sizeof buf)) > 0) result.err.append(buf, static_cast<size_t>(got));
  close(rd);
}

}  // namespace

std::string CommandResult::Summary() const {
  std::string last = err;
  while (!last.empty() && (last.back() == '\n' || last.back() == ' ')) last.pop_back();
  if (auto nl = last.rfind('\n'); nl != std::string::npos) last = last.substr(nl + 1);
  std::string head = timed_out          ? "timed out"
                     : term_signal != 0 ? "killed by signal " + std::to_string(term_signal)
                                        : "exit " + std::to_string(exit_code);
  return last.empty() ? head : head + ": " + last;
}

Result<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                 std::chrono::milliseconds deadline,
                                 const CommandOptions& options) {
  if (argv.empty()) return Status(Code::kInvalidArgument, "RunCommand: empty argv");
  // A child that exits without reading its stdin must cost an EPIPE, not the whole process.
  signal(SIGPIPE, SIG_IGN);
  // Fail early, as a value, for a program that cannot run; exec errors in the child would
  // otherwise only show as exit 127.
  if (argv[0].find('/') != std::string::npos && access(argv[0].c_str(), X_OK) != 0) {
    return Status(Code::kNotFound, argv[0] + ": " + std::strerror(errno));
  }
  Pipes pipes;
  if (Status s = MakePipes(pipes); !s.ok()) return s;
  ExecArgs exec_args(argv, options.extra_env);
  auto out_file = OpenOutputFile(options);
  if (!out_file.ok()) return out_file.status();
  auto cgroups = OpenCgroupFiles(options);
  if (!cgroups.ok()) return cgroups.status();

  const auto start = Clock::now();
  pid_t pid = fork();
  if (pid < 0) return Status(Code::kUnavailable, "fork: " + std::string(std::strerror(errno)));
  if (pid == 0) ExecChild(pipes, out_file->fd, options, *cgroups, exec_args);
  // Parent. Also set the group here: whichever of parent and child runs first wins the race,
  // and the kill below must never hit our own group.
  setpgid(pid, pid);
  if (Status s = AwaitExec(pid, pipes, argv[0], options); !s.ok()) return s;

  ChildIo io{std::exchange(pipes.in[1], -1), std::exchange(pipes.out[0], -1),
             std::exchange(pipes.err[0], -1)};
  if (out_file->fd >= 0) {
    // Nothing will arrive on the pipes; only the child's exit (below) is waited for.
    CloseIfOpen(io.stdout_fd);
    CloseIfOpen(io.stderr_fd);
  }
  fcntl(io.stdin_fd, F_SETFL, O_NONBLOCK);
  if (options.stdin_data.empty()) CloseIfOpen(io.stdin_fd);

  CommandResult result;
  const auto end = start + deadline;
  PumpIo(io, options, end, result);
  const int status = WaitForExit(pid, end, result);
  CloseIfOpen(io.stdout_fd);
  CloseIfOpen(io.stderr_fd);
  if (out_file->fd >= 0) ReadOutputFile(options, *out_file, result);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.term_signal = WTERMSIG(status);
  result.duration = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  return result;
}

bool IsZombie(long pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!stat || !std::getline(stat, line)) return false;
  // "pid (comm) S …": comm may hold spaces and parentheses; the state follows the last ')'.
  const auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return false;
  const char state = line[close + 2];
  return state == 'Z' || state == 'X';
}

}  // namespace stasis
