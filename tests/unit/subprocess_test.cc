// RunCommand: argv only, deadlines that kill the whole process group, stderr kept.
#include "base/subprocess.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

namespace stasis {
namespace {

using namespace std::chrono_literals;

TEST(RunCommandTest, KeepsStdoutStderrAndExitCode) {
  auto r = RunCommand({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, 10s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->out, "out\n");
  EXPECT_EQ(r->err, "err\n");
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->Summary(), "exit 3: err");
}

TEST(RunCommandTest, ArgumentsAreNeverInterpretedByAShell) {
  auto r = RunCommand({"/bin/echo", "$(id)", ";", "rm -rf /"}, 10s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out, "$(id) ; rm -rf /\n");
}

// An extra variable replaces ours of the same name rather than standing beside it: with both
// in the environment, which one a child reads depends on its libc.
TEST(RunCommandTest, ExtraEnvReplacesOurs) {
  ::setenv("STASIS_SUBPROCESS_TEST_VAR", "ours", 1);
  CommandOptions options;
  options.extra_env = {"STASIS_SUBPROCESS_TEST_VAR=theirs", "STASIS_SUBPROCESS_TEST_NEW=x"};
  auto r = RunCommand({"/usr/bin/env"}, 10s, options);
  ::unsetenv("STASIS_SUBPROCESS_TEST_VAR");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(r->out.find("\nSTASIS_SUBPROCESS_TEST_VAR=theirs\n"), std::string::npos) << r->out;
  EXPECT_EQ(r->out.find("STASIS_SUBPROCESS_TEST_VAR=ours"), std::string::npos) << r->out;
  EXPECT_NE(r->out.find("\nSTASIS_SUBPROCESS_TEST_NEW=x\n"), std::string::npos);
  EXPECT_NE(r->out.find("PATH="), std::string::npos) << "the rest of our environment is kept";
}

TEST(RunCommandTest, MissingProgramIsNotFound) {
  auto r = RunCommand({"/nonexistent/program"}, 10s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  auto r2 = RunCommand({"no-such-program-on-path-stasis"}, 10s);
  ASSERT_FALSE(r2.ok());
  EXPECT_EQ(r2.status().code(), Code::kNotFound);
}

TEST(RunCommandTest, DeadlineKillsTheWholeProcessGroup) {
  auto pidfile = std::filesystem::temp_directory_path() /
                 ("stasis-subprocess-" + std::to_string(getpid()));
  // The grandchild writes its pid and sleeps; it must die with its parent's group.
  auto r = RunCommand({"/bin/sh", "-c", "sleep 30 & echo $! > " + pidfile.string() + "; wait"},
                      500ms);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->timed_out);
  EXPECT_LT(r->duration, 5s);
  EXPECT_EQ(r->Summary(), "timed out");
  std::ifstream in(pidfile);
  pid_t grandchild = 0;
  in >> grandchild;
  ASSERT_GT(grandchild, 0);
  // Reaped by init eventually; kill(0) fails once it is gone. Give the kernel a moment.
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    gone = kill(grandchild, 0) != 0;
    if (!gone) usleep(20000);
  }
  std::filesystem::remove(pidfile);
  EXPECT_TRUE(gone) << "grandchild " << grandchild << " survived the deadline";
}

TEST(RunCommandTest, StdinIsDelivered) {
  CommandOptions o;
  o.stdin_data = std::string(200000, 'x');  // larger than a pipe buffer
  auto r = RunCommand({"/usr/bin/wc", "-c"}, 10s, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out, "200000\n");
}

TEST(RunCommandTest, OutputPathLetsDaemonsKeepTheirStdio) {
  auto log = std::filesystem::temp_directory_path() /
             ("stasis-subprocess-log-" + std::to_string(getpid()));
  CommandOptions o;
  o.output_path = log.string();
  // The background sleep holds stdout; with pipes this would block until the deadline.
  auto r = RunCommand({"/bin/sh", "-c", "echo started >&2; sleep 3 & exit 0"}, 10s, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_LT(r->duration, 2s);
  EXPECT_EQ(r->err, "started\n");
  std::filesystem::remove(log);
}

TEST(RunCommandTest, SignalIsReported) {
  auto r = RunCommand({"/bin/sh", "-c", "kill -TERM $$"}, 10s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, -1);
  EXPECT_EQ(r->term_signal, SIGTERM);
}

std::set<int> OpenDescriptorSet() {
  std::set<int> fds;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    fds.insert(std::stoi(e.path().filename().string()));
  }
  return fds;
}

int OpenDescriptors() { return static_cast<int>(OpenDescriptorSet().size()); }

// The descriptor limit that leaves exactly `free` numbers below it unused (new descriptors
// take the lowest free numbers, and the limit is on the number, not the count).
rlim_t LimitLeaving(int free) {
  const auto open = OpenDescriptorSet();
  int unused = 0;
  for (int fd = 0;; ++fd) {
    if (unused == free && !open.contains(fd)) return static_cast<rlim_t>(fd);
    if (!open.contains(fd)) ++unused;
  }
}

// Runs `body` in a forked child (it changes process-wide limits) and returns its exit code.
int InChild(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

// A fork refused by the kernel (a process limit) is an error value, and the pipes made for the
// child are closed: an agent that keeps retrying must not run out of descriptors. Root is
// exempt from RLIMIT_NPROC, so the child first becomes nobody.
TEST(RunCommandTest, AFailedForkLeaksNoDescriptor) {
  const int rc = InChild([] {
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) return 10;
    const rlimit none{0, 0};
    if (setrlimit(RLIMIT_NPROC, &none) != 0) return 11;
    const int before = OpenDescriptors();
    for (int i = 0; i < 20; ++i) {
      auto r = RunCommand({"/bin/true"}, 5s);
      if (r.ok() || r.status().code() != Code::kUnavailable) return 12;
      if (r.status().message().find("fork") == std::string::npos) return 13;
    }
    return OpenDescriptors() == before ? 0 : 14;
  });
  EXPECT_EQ(rc, 0) << "10/11: could not set the fault up; 12/13: not a fork error; 14: leaked";
}

// The same when only some of the pipes could be made (the descriptor limit reached half way).
TEST(RunCommandTest, PipesMadeBeforeAFailureAreClosed) {
  const int rc = InChild([] {
    const int before = OpenDescriptors();
    // Room for the first pipe and one more descriptor: the second pipe fails.
    const rlim_t limit = LimitLeaving(3);
    const rlimit few{limit, limit};
    if (setrlimit(RLIMIT_NOFILE, &few) != 0) return 11;
    for (int i = 0; i < 20; ++i) {
      auto r = RunCommand({"/bin/true"}, 5s);
      if (r.ok()) return 12;
    }
    return OpenDescriptors() == before ? 0 : 14;
  });
  EXPECT_EQ(rc, 0) << "11: could not set the fault up; 12: ran anyway; 14: leaked";
}

// The child writes "0" (itself) into each file before it execs: into a plain file here, so the
// file's content shows the write came first.
TEST(RunCommandTest, TheChildJoinsEachCgroupBeforeItExecs) {
  const auto dir = std::filesystem::temp_directory_path() / ("stasis-join-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  for (const char* f : {"a.procs", "b.procs"}) std::ofstream(dir / f).flush();
  CommandOptions o;
  o.join_cgroups = {(dir / "a.procs").string(), (dir / "b.procs").string()};
  auto r = RunCommand({"/bin/cat", (dir / "a.procs").string(), (dir / "b.procs").string()}, 10s, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->out, "0\n0\n");

  o.join_cgroups = {(dir / "missing" / "cgroup.procs").string()};
  auto missing = RunCommand({"/bin/true"}, 10s, o);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(missing.status().message().find("joining cgroup " + o.join_cgroups[0]), std::string::npos)
      << missing.status().ToString();
  std::filesystem::remove_all(dir);
}

// A real cgroup (under the pids hierarchy of cgroup v1, or the unified v2 root): the program
// runs in it, and leaves it when it exits.
TEST(RunCommandTest, TheChildRunsInTheCgroupItJoined) {
  namespace fs = std::filesystem;
  const fs::path parent = fs::exists("/sys/fs/cgroup/cgroup.controllers") ? fs::path("/sys/fs/cgroup")
                                                                          : fs::path("/sys/fs/cgroup/pids");
  ASSERT_TRUE(fs::exists(parent / "cgroup.procs")) << "no cgroup filesystem at " << parent;
  const fs::path cg = parent / ("stasis-subprocess-test-" + std::to_string(getpid()));
  fs::create_directory(cg);
  CommandOptions o;
  o.join_cgroups = {(cg / "cgroup.procs").string()};
  auto r = RunCommand({"/bin/cat", "/proc/self/cgroup"}, 10s, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(r->out.find(":/" + cg.filename().string() + "\n"), std::string::npos) << r->out;
  rmdir(cg.c_str());  // empty again: cat has exited
  EXPECT_FALSE(fs::exists(cg)) << "the cgroup still holds a process";
}

}  // namespace
}  // namespace stasis
