// Process exit codes that workers, launchers (zerofit run, zerofit slurm-launch) and the coordinator agree
// on. They live here, in the library every side already links, not in coordinator/.
#pragma once

namespace zerofit::jobspec {

// A worker (and the launcher after it) exits with this code after a preemption checkpoint: the job is to be
// requeued, not failed. 75 is EX_TEMPFAIL; a Slurm cluster can also list it in slurm.conf's RequeueExit.
inline constexpr int kPreemptedExitCode = 75;

// A worker exits with this code when the coordinator told it that its attempt had failed (a rank hung, a
// node was lost, another rank failed) and it did not leave on its own within a short grace after aborting
// its communicator (worker/loop/heartbeater.h). No sysexits meaning; chosen to stand out in a launcher's log.
inline constexpr int kAbortedExitCode = 86;

}  // namespace zerofit::jobspec
