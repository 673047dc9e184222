// A worker dies with the process that launched it (mpiexec, srun's step daemon, `zerofit worker`'s parent):
// a rank whose launcher is gone has nobody to report to, and left alone it trains on as an orphan until the
// coordinator's heartbeat deadline (or forever, if the coordinator went with the launcher).
//
// Which signal: SIGKILL for zerofit_worker. It cannot be caught, blocked or delayed by a busy thread (gRPC,
// MPI progress, a long CPU optimizer step), so the rank is gone at once; and it loses nothing, because every
// file a worker writes (checkpoint shards, manifest, `latest`, exported model) goes to a temporary name first
// and is renamed into place, so a killed rank leaves at most a `*.tmp` behind, never a partial file under a
// final name. (The launcher itself gets SIGTERM from zerofit instead: Open MPI's mpiexec needs it to take its
// ranks down; see cli/subprocess.h.)
//
// Limits: the kernel sends the signal when the parent *thread* that forked this process exits (for mpiexec
// and srun that is their main thread); a parent that died before ExitWithParent ran, e.g. while LibTorch's
// libraries were loading, is only noticed if `original_parent` was read before that (else the coordinator's
// heartbeat deadline ends the rank).
#pragma once

#include <sys/types.h>

#include "absl/status/status.h"

namespace zerofit::launch {

// Arms PR_SET_PDEATHSIG with `signal` for the calling process, then checks getppid() against
// `original_parent` (getppid() read as early as possible, e.g. first thing in main): if the parent is
// already gone, raises `signal` now, as the kernel would have; if this process survives that (a handled or
// ignored signal), returns FailedPrecondition naming the parent. Call it from the main thread before
// starting threads; exec keeps the setting (unless the binary is set-user-ID).
absl::Status ExitWithParent(int signal, pid_t original_parent);

}  // namespace zerofit::launch
