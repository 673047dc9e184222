// The CPUs this process may run on, and whether a thread count fits them. A launcher decides the first:
// Open MPI's mpiexec binds every rank to one core unless told otherwise (`--bind-to none`, or `--map-by
// slot:PE=n --bind-to core` for n cores a rank), srun to its --cpus-per-task. Threads beyond that mask share
// its CPUs: 16 CPU AdamW threads on one bound core run at one thread's speed (issue 30, measured on an H200).
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace zerofit::core {

// CPUs in the calling thread's affinity mask (sched_getaffinity; a new thread inherits it), at least 1;
// std::thread::hardware_concurrency() where the mask cannot be read.
int AllowedCpus();

// `threads` when >= 1, else (0: "as many as may run") AllowedCpus().
int ThreadsOrAllowedCpus(int threads);

// OK when `threads` <= `cpus`; else FailedPrecondition naming `what`, both numbers, the cause and the fix.
absl::Status CheckThreadsFitCpus(absl::string_view what, int threads, int cpus);

}  // namespace zerofit::core
