#include "launch/crash_report.h"

#include <execinfo.h>
#include <ucontext.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace zerofit::launch {
namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr int kMaxFrames = 64;

// The program's name for the handler: written once, at install, before any signal can arrive.
const char* g_program = "zerofit";  // NOLINT: a signal handler has no other way to reach it

void WriteAll(const char* text) {
  size_t left = std::strlen(text);
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, text, left);
    if (n <= 0) return;
    text += n;
    left -= static_cast<size_t>(n);
  }
}

// The signal's number as text, without snprintf (not async-signal-safe).
void WriteNumber(int value) {
  char digits[12];
  int at = sizeof(digits) - 1;
  digits[at] = '\0';
  do {
    digits[--at] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value > 0 && at > 0);
  WriteAll(digits + at);
}

void WriteHex(uintptr_t value) {
  char digits[2 + 2 * sizeof(uintptr_t) + 1];
  int at = sizeof(digits) - 1;
  digits[at] = '\0';
  do {
    digits[--at] = "0123456789abcdef"[value & 0xf];
    value >>= 4;
  } while (value > 0 && at > 2);
  digits[--at] = 'x';
  digits[--at] = '0';
  WriteAll(digits + at);
}

// The faulting instruction and, when a call jumped to a bad address (a dangling function pointer or vtable),
// the caller: the return address that call left on top of the stack. Written before the stack: glibc's
// backtrace cannot unwind from a bad instruction address and may itself fault there, and a second fault ends
// the process (SA_RESETHAND) with only what was already written. The word is read after the instruction's
// line for the same reason (a bad stack pointer).
void WriteFaultingFrames(void* context) {
#if defined(__x86_64__)
  const auto* uc = static_cast<const ucontext_t*>(context);
  void* frames[2] = {reinterpret_cast<void*>(uc->uc_mcontext.gregs[REG_RIP]), nullptr};
  WriteAll(g_program);
  WriteAll(
      ": the faulting instruction, then the word on top of the stack (the caller, after a call to a bad "
      "address):\n");
  ::backtrace_symbols_fd(frames, 1, STDERR_FILENO);
  frames[1] = *reinterpret_cast<void* const*>(uc->uc_mcontext.gregs[REG_RSP]);
  ::backtrace_symbols_fd(frames + 1, 1, STDERR_FILENO);
#else
  (void)context;
#endif
}

void OnFatalSignal(int signal, siginfo_t* info, void* context) {
  WriteAll(g_program);
  WriteAll(": fatal signal ");
  WriteNumber(signal);
  WriteAll(" (");
  WriteAll(sigabbrev_np(signal) != nullptr ? sigabbrev_np(signal) : "?");
  WriteAll("), address ");
  WriteHex(reinterpret_cast<uintptr_t>(info->si_addr));
  WriteAll(", thread ");
  WriteNumber(static_cast<int>(::gettid()));
  WriteAll("\n");
  WriteFaultingFrames(context);
  WriteAll(g_program);
  WriteAll(": stack, innermost first:\n");
  void* frames[kMaxFrames];
  const int n = ::backtrace(frames, kMaxFrames);
  ::backtrace_symbols_fd(frames, n, STDERR_FILENO);
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

}  // namespace

absl::Status InstallCrashReport(const char* program) {
  g_program = program;
  void* warm[1];
  (void)::backtrace(warm, 1);  // loads libgcc's unwinder now, not inside the handler
  struct sigaction action {};
  action.sa_sigaction = &OnFatalSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_SIGINFO | SA_RESETHAND;  // a second fault inside the handler dies at once
  for (int s : kSignals) {
    if (::sigaction(s, &action, nullptr) != 0) {
      return absl::InternalError(absl::StrCat("sigaction(", s, "): ", std::strerror(errno)));
    }
  }
  return absl::OkStatus();
}

}  // namespace zerofit::launch
