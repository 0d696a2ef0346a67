// RunCommand: argv only, deadlines that kill the whole process group, stderr kept.
#include "base/subprocess.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

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

}  // namespace
}  // namespace stasis
