// A rank dies with its launcher: killed when the launcher exits, and at once when the launcher was already
// gone by the time the rank armed the watch. The test process is a child subreaper, so the orphaned rank
// becomes its child and its end (and the signal that caused it) can be read with waitpid.
#include "launch/parent_watch.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/time/clock.h"

namespace zerofit::launch {
namespace {

class ParentWatchTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0); }
  void TearDown() override { ::prctl(PR_SET_CHILD_SUBREAPER, 0); }
};

// How `pid` (a child or an adopted orphan) ended: its wait status, or nullopt if it still runs after
// `timeout` (it is then killed).
std::optional<int> EndOf(pid_t pid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  int wstatus = 0;
  while (absl::Now() < deadline) {
    if (::waitpid(pid, &wstatus, WNOHANG) == pid) return wstatus;
    absl::SleepFor(absl::Milliseconds(10));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &wstatus, 0);
  return std::nullopt;
}

// Forks a launcher that forks a rank running `rank(launcher pid, fd)`; the launcher reports the rank's pid on
// a pipe and exits once the rank writes a byte to `fd` (or at once unless `launcher_waits_for_rank`).
pid_t LaunchRank(void (*rank)(pid_t launcher, int launcher_gone_fd), bool launcher_waits_for_rank) {
  int pid_pipe[2], go_pipe[2];
  if (::pipe(pid_pipe) != 0 || ::pipe(go_pipe) != 0) return -1;
  const pid_t launcher = ::fork();
  if (launcher == 0) {
    const pid_t self = ::getpid();
    const pid_t r = ::fork();
    if (r == 0) {
      ::close(pid_pipe[0]);
      ::close(pid_pipe[1]);
      ::close(go_pipe[0]);
      rank(self, go_pipe[1]);
      ::_exit(0);
    }
    ::close(go_pipe[1]);
    (void)!::write(pid_pipe[1], &r, sizeof(r));
    char byte;
    if (launcher_waits_for_rank) (void)!::read(go_pipe[0], &byte, 1);
    ::_exit(0);  // the launcher dies (like a SIGKILLed mpiexec: no cleanup)
  }
  ::close(pid_pipe[1]);
  ::close(go_pipe[0]);
  ::close(go_pipe[1]);
  pid_t rank_pid = -1;
  if (::read(pid_pipe[0], &rank_pid, sizeof(rank_pid)) != static_cast<ssize_t>(sizeof(rank_pid)))
    rank_pid = -1;
  ::close(pid_pipe[0]);
  int wstatus = 0;
  ::waitpid(launcher, &wstatus, 0);
  return rank_pid;
}

TEST_F(ParentWatchTest, ARankIsKilledWhenItsLauncherExits) {
  const pid_t rank = LaunchRank(
      [](pid_t launcher, int armed_fd) {
        if (!ExitWithParent(SIGKILL, launcher).ok()) ::_exit(3);
        (void)!::write(armed_fd, "x", 1);                // armed: the launcher may exit now
        for (int i = 0; i < 300; ++i) ::usleep(100000);  // "trains" for 30 s unless killed
        ::_exit(4);
      },
      /*launcher_waits_for_rank=*/true);
  ASSERT_GT(rank, 0);
  const std::optional<int> end = EndOf(rank, absl::Seconds(5));
  ASSERT_TRUE(end.has_value()) << "the rank outlived its launcher";
  ASSERT_TRUE(WIFSIGNALED(*end)) << "exit code " << WEXITSTATUS(*end);
  EXPECT_EQ(WTERMSIG(*end), SIGKILL);
}

TEST_F(ParentWatchTest, ALauncherGoneBeforeTheWatchIsArmedIsNoticed) {
  const pid_t rank = LaunchRank(
      [](pid_t launcher, int) {
        // The launcher exits at once; the rank arms the watch only after it was adopted.
        for (int i = 0; i < 500 && ::getppid() == launcher; ++i) ::usleep(10000);
        if (::getppid() == launcher) ::_exit(5);
        (void)ExitWithParent(SIGKILL, launcher);
        ::_exit(3);  // survived: the race went unnoticed
      },
      /*launcher_waits_for_rank=*/false);
  ASSERT_GT(rank, 0);
  const std::optional<int> end = EndOf(rank, absl::Seconds(10));
  ASSERT_TRUE(end.has_value());
  ASSERT_TRUE(WIFSIGNALED(*end)) << "exit code " << WEXITSTATUS(*end);
  EXPECT_EQ(WTERMSIG(*end), SIGKILL);
}

TEST_F(ParentWatchTest, ARankWhoseLauncherLivesRunsOn) {
  const pid_t rank = ::fork();
  ASSERT_GE(rank, 0);
  if (rank == 0) ::_exit(ExitWithParent(SIGKILL, ::getppid()).ok() ? 0 : 3);
  const std::optional<int> end = EndOf(rank, absl::Seconds(5));
  ASSERT_TRUE(end.has_value());
  ASSERT_TRUE(WIFEXITED(*end));
  EXPECT_EQ(WEXITSTATUS(*end), 0);
}

}  // namespace
}  // namespace zerofit::launch
