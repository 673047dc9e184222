// One rank of a coordinator job, start to end: connects to the coordinator, opens the job's key-value
// rendezvous and runs the worker loop (worker_loop.h) with `options`. The entry point for programs that must
// not see generated protobuf types (zerofit_worker's main sees LibTorch: worker_loop_options.h says why).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "client/connection.h"
#include "worker/loop/worker_loop_options.h"

namespace zerofit::worker {

// The process's exit code as WorkerLoop::Run returns it (0, or kPreemptedExitCode), or its error.
absl::StatusOr<int> RunWorker(WorkerLoopOptions options, const client::ConnectionOptions& connection,
                              const std::string& job);

}  // namespace zerofit::worker
