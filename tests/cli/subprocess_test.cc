// Child processes for the launchers: exit codes, output capture, deadlines, and no child left behind: a
// signal reaches the child's whole process group, and the child gets SIGTERM when its spawner dies.
#include "cli/subprocess.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace zerofit::cli {
namespace {

// Alive and not a zombie (an orphan's zombie may never be reaped in a container).
bool Running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_field, comm, state;
  if (!(stat >> pid_field >> comm >> state)) return false;
  return state != "Z" && state != "X";
}

bool EndsWithin(pid_t pid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (Running(pid)) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

TEST(SubprocessTest, RunCommandCapturesOutputAndExitCode) {
  auto r = RunCommand({"sh", "-c", "echo out; echo err >&2; exit 3"}, absl::Seconds(10));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->output, "out\nerr\n");
  auto killed = RunCommand({"sh", "-c", "kill -9 $$"}, absl::Seconds(10));
  ASSERT_TRUE(killed.ok());
  EXPECT_EQ(killed->exit_code, 128 + 9);
  EXPECT_FALSE(RunCommand({"/nonexistent/zerofit-no-such-binary"}, absl::Seconds(1)).ok());
}

TEST(SubprocessTest, ACommandPastItsDeadlineIsKilled) {
  const absl::Time start = absl::Now();
  auto r = RunCommand({"sleep", "30"}, absl::Milliseconds(300));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(SubprocessTest, ChildrenGetBlockedSignalsBackAndAreReapedWhenDropped) {
  // The launcher blocks SIGTERM for itself; its children must still die of it.
  sigset_t term, old;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, &old);
  auto child = ChildProcess::Spawn({"sleep", "30"});
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ASSERT_TRUE(child.ok()) << child.status();
  auto running = child->Poll();
  ASSERT_TRUE(running.ok());
  EXPECT_FALSE(running->has_value());
  child->Signal(SIGTERM);
  auto code = child->Wait(absl::Seconds(5));
  ASSERT_TRUE(code.ok());
  ASSERT_TRUE(code->has_value()) << "SIGTERM did not end the child";
  EXPECT_EQ(**code, 128 + SIGTERM);
  // Dropping a running child kills and reaps it.
  pid_t pid = 0;
  {
    auto other = ChildProcess::Spawn({"sleep", "30"});
    ASSERT_TRUE(other.ok());
    pid = other->pid();
  }
  EXPECT_NE(::kill(pid, 0), 0) << "the child outlived its ChildProcess";
}

TEST(SubprocessTest, ChildrenGetExtraEnvironmentVariablesOverridingInheritedOnes) {
  ::setenv("ZEROFIT_SUBPROCESS_TEST_A", "inherited", 1);
  ::setenv("ZEROFIT_SUBPROCESS_TEST_B", "kept", 1);
  auto child = ChildProcess::Spawn(
      {"sh", "-c", "[ \"$ZEROFIT_SUBPROCESS_TEST_A\" = given ] && [ \"$ZEROFIT_SUBPROCESS_TEST_B\" = kept ]"},
      {"ZEROFIT_SUBPROCESS_TEST_A=given"});
  ASSERT_TRUE(child.ok()) << child.status();
  auto code = child->Wait(absl::Seconds(10));
  ASSERT_TRUE(code.ok() && code->has_value());
  EXPECT_EQ(**code, 0);
}

TEST(SubprocessTest, AChildLeadsItsOwnProcessGroupWhichSignalReachesWhole) {
  const std::string file =
      (std::filesystem::temp_directory_path() / ("zerofit_subprocess_" + std::to_string(::getpid()) + ".pid"))
          .string();
  std::filesystem::remove(file);
  // The shell starts a grandchild (like mpiexec its ranks) and waits; its stdin is /dev/null.
  auto child = ChildProcess::Spawn({"sh", "-c",
                                    "[ \"$(readlink /proc/self/fd/0)\" = /dev/null ] || exit 9; sleep 30 & "
                                    "echo $! > " +
                                        file + ".tmp && mv " + file + ".tmp " + file + "; wait"});
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_EQ(::getpgid(child->pid()), child->pid());
  EXPECT_NE(::getpgid(child->pid()), ::getpgrp());
  pid_t grandchild = 0;
  for (int i = 0; i < 250 && grandchild == 0; ++i) {
    std::ifstream in(file);
    if (!(in >> grandchild)) absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_GT(grandchild, 0) << "the shell never started its grandchild";
  EXPECT_EQ(::getpgid(grandchild), child->pid());
  child->Signal(SIGTERM);
  auto code = child->Wait(absl::Seconds(5));
  ASSERT_TRUE(code.ok() && code->has_value());
  EXPECT_TRUE(EndsWithin(grandchild, absl::Seconds(5))) << "the signal missed the child's own child";
  if (Running(grandchild)) ::kill(grandchild, SIGKILL);
  std::filesystem::remove(file);
}

TEST(SubprocessTest, AChildGetsSigtermWhenItsSpawnerDies) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t spawner = ::fork();
  ASSERT_GE(spawner, 0);
  if (spawner == 0) {
    ::close(fds[0]);
    auto child = ChildProcess::Spawn({"sleep", "30"});
    const pid_t pid = child.ok() ? child->pid() : -1;
    (void)!::write(fds[1], &pid, sizeof(pid));
    ::_exit(0);  // dies without ChildProcess's destructor: like a SIGKILLed zerofit
  }
  ::close(fds[1]);
  pid_t child = -1;
  ASSERT_EQ(::read(fds[0], &child, sizeof(child)), static_cast<ssize_t>(sizeof(child)));
  ::close(fds[0]);
  int wstatus = 0;
  ASSERT_EQ(::waitpid(spawner, &wstatus, 0), spawner);
  ASSERT_GT(child, 0) << "the spawner could not start its child";
  const bool ended = EndsWithin(child, absl::Seconds(5));
  if (!ended) ::kill(child, SIGKILL);
  EXPECT_TRUE(ended) << "the child outlived the process that spawned it";
}

}  // namespace
}  // namespace zerofit::cli
