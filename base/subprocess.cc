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

  int in_pipe[2], out_pipe[2], err_pipe[2], exec_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0) return Status(Code::kInternal, "pipe: " + std::string(std::strerror(errno)));
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0 ||
      pipe2(exec_pipe, O_CLOEXEC) != 0) {
    return Status(Code::kInternal, "pipe: " + std::string(std::strerror(errno)));
  }

  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_store;
  for (char** e = environ; *e; ++e) env_store.emplace_back(*e);
  for (const auto& e : options.extra_env) env_store.push_back(e);
  std::vector<char*> envp;
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);

  int out_file = -1;
  off_t out_file_start = 0;
  if (options.output_path) {
    out_file = open(options.output_path->c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (out_file < 0) {
      return Status(Code::kFailedPrecondition,
                    *options.output_path + ": " + std::strerror(errno));
    }
    out_file_start = lseek(out_file, 0, SEEK_END);
  }

  const auto start = Clock::now();
  pid_t pid = fork();
  if (pid < 0) return Status(Code::kUnavailable, "fork: " + std::string(std::strerror(errno)));
  if (pid == 0) {
    // Child: only async-signal-safe calls from here on.
    setpgid(0, 0);  // its own process group, so a timeout kills everything it started
    dup2(in_pipe[0], 0);
    dup2(out_file >= 0 ? out_file : out_pipe[1], 1);
    dup2(out_file >= 0 ? out_file : err_pipe[1], 2);
    signal(SIGPIPE, SIG_DFL);
    if (options.cwd && chdir(options.cwd->c_str()) != 0) {
      int e = errno;
      (void)!write(exec_pipe[1], &e, sizeof e);
      _exit(127);
    }
    execvpe(args[0], args.data(), envp.data());
    int e = errno;
    (void)!write(exec_pipe[1], &e, sizeof e);
    _exit(127);
  }
  // Parent. Also set the group here: whichever of parent and child runs first wins the race,
  // and the kill below must never hit our own group.
  setpgid(pid, pid);
  close(in_pipe[0]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  close(exec_pipe[1]);

  int exec_errno = 0;
  if (read(exec_pipe[0], &exec_errno, sizeof exec_errno) == sizeof exec_errno) {
    close(exec_pipe[0]);
    waitpid(pid, nullptr, 0);
    close(in_pipe[1]);
    close(out_pipe[0]);
    close(err_pipe[0]);
    return Status(exec_errno == ENOENT || exec_errno == EACCES ? Code::kNotFound : Code::kInternal,
                  argv[0] + ": " + std::strerror(exec_errno));
  }
  close(exec_pipe[0]);

  int stdin_fd = in_pipe[1], stdout_fd = out_pipe[0], stderr_fd = err_pipe[0];
  if (out_file >= 0) {
    // Nothing will arrive on the pipes; only the child's exit (below) is waited for.
    CloseIfOpen(stdout_fd);
    CloseIfOpen(stderr_fd);
  }
  fcntl(stdin_fd, F_SETFL, O_NONBLOCK);
  size_t stdin_off = 0;
  if (options.stdin_data.empty()) CloseIfOpen(stdin_fd);

  CommandResult result;
  const auto end = start + deadline;
  char buf[65536];
  while (stdout_fd >= 0 || stderr_fd >= 0 || stdin_fd >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      break;
    }
    pollfd fds[3];
    int n = 0;
    int idx_out = -1, idx_err = -1, idx_in = -1;
    if (stdout_fd >= 0) { idx_out = n; fds[n++] = {stdout_fd, POLLIN, 0}; }
    if (stderr_fd >= 0) { idx_err = n; fds[n++] = {stderr_fd, POLLIN, 0}; }
    if (stdin_fd >= 0) { idx_in = n; fds[n++] = {stdin_fd, POLLOUT, 0}; }
    int r = poll(fds, n, static_cast<int>(std::min<long>(left.count(), 1000)));
    if (r < 0 && errno != EINTR) break;
    if (r <= 0) continue;
    auto drain = [&](int idx, int& fd, std::string& into) {
      if (idx < 0 || !(fds[idx].revents & (POLLIN | POLLHUP | POLLERR))) return;
      ssize_t got = read(fd, buf, sizeof buf);
      if (got > 0) AppendBounded(into, buf, static_cast<size_t>(got), options.max_output_bytes);
      else if (got == 0 || (errno != EINTR && errno != EAGAIN)) CloseIfOpen(fd);
    };
    drain(idx_out, stdout_fd, result.out);
    drain(idx_err, stderr_fd, result.err);
    if (idx_in >= 0 && (fds[idx_in].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t put = write(stdin_fd, options.stdin_data.data() + stdin_off,
                          options.stdin_data.size() - stdin_off);
      if (put > 0) stdin_off += static_cast<size_t>(put);
      if (put < 0 && errno != EAGAIN && errno != EINTR) CloseIfOpen(stdin_fd);
      if (stdin_off == options.stdin_data.size()) CloseIfOpen(stdin_fd);
    }
  }
  CloseIfOpen(stdin_fd);

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
  CloseIfOpen(stdout_fd);
  CloseIfOpen(stderr_fd);

  if (out_file >= 0) {
    close(out_file);
    int rd = open(options.output_path->c_str(), O_RDONLY | O_CLOEXEC);
    if (rd >= 0) {
      off_t size = lseek(rd, 0, SEEK_END);
      off_t from = std::max<off_t>(out_file_start,
                                   size - static_cast<off_t>(options.max_output_bytes));
      lseek(rd, from, SEEK_SET);
      ssize_t got;
      while ((got = read(rd, buf, sizeof buf)) > 0) result.err.append(buf, static_cast<size_t>(got));
      close(rd);
    }
  }
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
