// A crashing process writes its stack and dies of its signal: a forked child installs the report, then
// faults (a write through a null pointer) or aborts; the parent reads the child's stderr from a pipe.
#include "launch/crash_report.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace zerofit::launch {
namespace {

struct Ended {
  int wstatus = 0;
  std::string stderr_text;
};

// Runs `crash` in a child whose stderr is a pipe, after InstallCrashReport("crash_report_test").
Ended RunChild(void (*crash)()) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], STDERR_FILENO);
    ::close(fds[0]);
    if (!InstallCrashReport("crash_report_test").ok()) ::_exit(3);
    crash();
    ::_exit(0);  // not reached
  }
  ::close(fds[1]);
  Ended e;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;)
    e.stderr_text.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  ::waitpid(pid, &e.wstatus, 0);
  return e;
}

void WriteThroughNull() {
  volatile int* p = nullptr;
  *p = 1;
}

void Abort() { std::abort(); }

void CallABadAddress() {
  void (*volatile bad)() = reinterpret_cast<void (*)()>(uintptr_t{0x40});
  bad();
}

TEST(CrashReportTest, AFaultWritesTheStackAndDiesOfItsSignal) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer reports the fault itself";
#endif
  const Ended e = RunChild(&WriteThroughNull);
  ASSERT_TRUE(WIFSIGNALED(e.wstatus)) << e.stderr_text;
  EXPECT_EQ(WTERMSIG(e.wstatus), SIGSEGV);
  EXPECT_NE(e.stderr_text.find("crash_report_test: fatal signal 11 (SEGV), address 0x0, thread "),
            std::string::npos)
      << e.stderr_text;
  EXPECT_NE(e.stderr_text.find("crash_report_test: stack, innermost first:\n"), std::string::npos)
      << e.stderr_text;
  // At least the handler's frame and the faulting one, each on its own line ("module(+0x...)[0x...]").
  size_t frames = 0;
  for (size_t at = 0; (at = e.stderr_text.find("[0x", at)) != std::string::npos; ++at) ++frames;
  EXPECT_GE(frames, 2u) << e.stderr_text;
}

// A call through a bad function pointer leaves an instruction address nothing can unwind from: the report
// names that address and, from the top of the stack, the caller.
TEST(CrashReportTest, ACallToABadAddressNamesTheCaller) {
#if defined(__SANITIZE_ADDRESS__) || !defined(__x86_64__)
  GTEST_SKIP() << "AddressSanitizer reports the fault itself; the faulting frames are read on x86-64";
#endif
  const Ended e = RunChild(&CallABadAddress);
  ASSERT_TRUE(WIFSIGNALED(e.wstatus)) << e.stderr_text;
  EXPECT_EQ(WTERMSIG(e.wstatus), SIGSEGV);
  const size_t faulting = e.stderr_text.find("the faulting instruction, then the word on top of the stack");
  ASSERT_NE(faulting, std::string::npos) << e.stderr_text;
  EXPECT_NE(e.stderr_text.find("[0x40]", faulting), std::string::npos) << e.stderr_text;  // the bad address
  EXPECT_NE(e.stderr_text.find("launch_unit_test(", faulting), std::string::npos)
      << e.stderr_text;  // the caller
}

TEST(CrashReportTest, AnAbortIsReportedToo) {
  const Ended e = RunChild(&Abort);
  ASSERT_TRUE(WIFSIGNALED(e.wstatus)) << e.stderr_text;
  EXPECT_EQ(WTERMSIG(e.wstatus), SIGABRT);
  EXPECT_NE(e.stderr_text.find("crash_report_test: fatal signal 6 (ABRT)"), std::string::npos)
      << e.stderr_text;
}

}  // namespace
}  // namespace zerofit::launch
