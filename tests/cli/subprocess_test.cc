// Child processes for the launchers: exit codes, output capture, deadlines, and no child left behind.
#include "cli/subprocess.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

namespace zerofit::cli {
namespace {

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

}  // namespace
}  // namespace zerofit::cli
