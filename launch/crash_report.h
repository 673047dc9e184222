// A crashing worker says where: on SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT the process writes one line
// naming the program, the signal, the fault address and the thread, then the faulting instruction and the
// word on top of the stack (where a call to a bad address came from: the stack cannot be unwound from such an
// instruction, so these come first), then its stack (glibc's backtrace, return addresses with the module and
// offset, for addr2line), to stderr, and dies of the same signal as it would have (the default action is
// restored and the signal raised again), so a launcher still sees "died by signal N".
//
// Why: a rank that crashes under srun leaves only "task 0 died by signal: 11" in slurmd's log, no core file
// on most clusters; with this the job's output holds the stack. MPI (Open MPI's opal) installs handlers of
// its own for some of these signals in MPI_Init, which then take over: this one covers the start before it,
// and every signal MPI leaves alone.
//
// Install first thing in main, before threads start. The handler only calls async-signal-safe functions
// (write, backtrace_symbols_fd, signal, raise; backtrace itself is loaded at install time, since its first
// call may allocate). Not on an alternate stack: a stack overflow dies without the report.
#pragma once

#include "absl/status/status.h"

namespace zerofit::launch {

// `program` (a string literal or otherwise static: the handler keeps the pointer) names the process in the
// report. Fails only if sigaction does.
absl::Status InstallCrashReport(const char* program);

}  // namespace zerofit::launch
