#include "launch/crash_report.h"

#include <execinfo.h>
#include <unistd.h>

#include <csignal>
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

void OnFatalSignal(int signal) {
  WriteAll(g_program);
  WriteAll(": fatal signal ");
  WriteNumber(signal);
  WriteAll(" (");
  WriteAll(sigabbrev_np(signal) != nullptr ? sigabbrev_np(signal) : "?");
  WriteAll("); stack, innermost first:\n");
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
  action.sa_handler = &OnFatalSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;  // a second fault inside the handler dies at once
  for (int s : kSignals) {
    if (::sigaction(s, &action, nullptr) != 0) {
      return absl::InternalError(absl::StrCat("sigaction(", s, "): ", std::strerror(errno)));
    }
  }
  return absl::OkStatus();
}

}  // namespace zerofit::launch
