// One coordinator per state directory: a lock held by another process refuses a second one, naming the
// holder's PID and address; the kernel frees it when the holder is SIGKILLed.
#include "coordinator/state_dir_lock.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "tests/support/temp_dir.h"

namespace zerofit::coordinator {
namespace {

// A child process that takes the lock, records `address`, tells the parent through a pipe, and waits to be
// killed (at most 60 s, so a failing test leaves no process behind for long).
pid_t StartHolder(const std::string& dir, const std::string& address) {
  int ready[2];
  EXPECT_EQ(::pipe(ready), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    auto lock = StateDirLock::Acquire(dir);
    const char ok = lock.ok() && lock->SetAddress(address).ok() ? '1' : '0';
    (void)!::write(ready[1], &ok, 1);
    ::sleep(60);
    ::_exit(0);
  }
  ::close(ready[1]);
  pollfd p{ready[0], POLLIN, 0};
  char ok = '0';
  EXPECT_EQ(::poll(&p, 1, 10000), 1) << "the holder did not report within 10 s";
  EXPECT_EQ(::read(ready[0], &ok, 1), 1);
  EXPECT_EQ(ok, '1') << "the holder could not take the lock";
  ::close(ready[0]);
  return pid;
}

TEST(StateDirLockTest, ASecondHolderFailsNamingTheFirstAndAKilledHolderFreesIt) {
  test_support::TempDir dir("state_dir_lock");
  const pid_t holder = StartHolder(dir.path(), "127.0.0.1:7171");
  auto second = StateDirLock::Acquire(dir.path());
  ASSERT_FALSE(second.ok()) << "two holders of " << dir.path();
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(second.status().message());
  EXPECT_NE(message.find(absl::StrCat("pid ", holder)), std::string::npos) << message;
  EXPECT_NE(message.find("address 127.0.0.1:7171"), std::string::npos) << message;
  EXPECT_NE(message.find(dir.path()), std::string::npos) << message;

  ASSERT_EQ(::kill(holder, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(holder, &status, 0), holder);
  auto after = StateDirLock::Acquire(dir.path());
  ASSERT_TRUE(after.ok()) << after.status();
  auto third = StateDirLock::Acquire(dir.path());  // another open file description, same process: refused
  ASSERT_FALSE(third.ok());
  EXPECT_NE(third.status().message().find(absl::StrCat("pid ", ::getpid())), std::string::npos)
      << third.status();
}

TEST(StateDirLockTest, ReleasedOnDestructionAndMovable) {
  test_support::TempDir dir("state_dir_lock");
  {
    auto lock = StateDirLock::Acquire(dir.path());
    ASSERT_TRUE(lock.ok()) << lock.status();
    StateDirLock moved = std::move(*lock);
    EXPECT_FALSE(StateDirLock::Acquire(dir.path()).ok());
  }
  EXPECT_TRUE(StateDirLock::Acquire(dir.path()).ok());
}

}  // namespace
}  // namespace zerofit::coordinator
