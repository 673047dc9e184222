// Stopping a launcher: SIGTERM to its group first, SIGKILL once the grace period is over (or at a second
// request), never before.
#include "cli/launcher_stop.h"

#include <gtest/gtest.h>
#include <signal.h>

namespace zerofit::cli {
namespace {

// A launcher that ignores SIGTERM (a hung mpiexec): only SIGKILL ends it.
absl::StatusOr<ChildProcess> Stubborn() {
  return ChildProcess::Spawn({"sh", "-c", "trap '' TERM; while :; do sleep 0.05; done"});
}

std::optional<int> ExitWithin(ChildProcess& p, absl::Duration timeout) {
  auto code = p.Wait(timeout);
  return code.ok() ? *code : std::nullopt;
}

TEST(LauncherStopTest, SigtermFirst) {
  auto launcher = ChildProcess::Spawn({"sleep", "30"});
  ASSERT_TRUE(launcher.ok()) << launcher.status();
  LauncherStop stop(absl::Seconds(5));
  EXPECT_FALSE(stop.stopping());
  const absl::Time t0 = absl::Now();
  stop.Begin(*launcher, t0);
  EXPECT_TRUE(stop.stopping());
  EXPECT_EQ(ExitWithin(*launcher, absl::Seconds(5)), 128 + SIGTERM);
}

TEST(LauncherStopTest, SigkillOnlyOnceTheGracePeriodIsOver) {
  auto launcher = Stubborn();
  ASSERT_TRUE(launcher.ok()) << launcher.status();
  absl::SleepFor(absl::Milliseconds(100));  // the trap is set
  LauncherStop stop(absl::Seconds(5));
  const absl::Time t0 = absl::Now();
  stop.Begin(*launcher, t0);
  stop.Tick(*launcher, t0 + absl::Seconds(4));
  EXPECT_EQ(ExitWithin(*launcher, absl::Milliseconds(300)), std::nullopt) << "killed before the grace ended";
  stop.Tick(*launcher, t0 + absl::Seconds(5));
  EXPECT_EQ(ExitWithin(*launcher, absl::Seconds(5)), 128 + SIGKILL);
}

TEST(LauncherStopTest, ASecondRequestKillsAtOnce) {
  auto launcher = Stubborn();
  ASSERT_TRUE(launcher.ok()) << launcher.status();
  absl::SleepFor(absl::Milliseconds(100));
  LauncherStop stop(absl::Seconds(5));
  const absl::Time t0 = absl::Now();
  stop.Begin(*launcher, t0);
  EXPECT_EQ(ExitWithin(*launcher, absl::Milliseconds(300)), std::nullopt);
  stop.Begin(*launcher, t0 + absl::Seconds(1));
  EXPECT_EQ(ExitWithin(*launcher, absl::Seconds(5)), 128 + SIGKILL);
}

}  // namespace
}  // namespace zerofit::cli
