#include "worker/loop/run_worker.h"

#include <utility>

#include "client/coordinator_client.h"
#include "client/kv_rendezvous.h"
#include "worker/loop/worker_loop.h"

namespace zerofit::worker {

absl::StatusOr<int> RunWorker(WorkerLoopOptions options, const client::ConnectionOptions& connection,
                              const std::string& job) {
  const client::CoordinatorClient coordinator(connection);
  // Outlives the loop, and so every session (and NCCL bootstrap) the loop builds.
  client::KvRendezvous rendezvous(coordinator, job);
  WorkerLoop loop(std::move(options), &coordinator, job, &rendezvous);
  return loop.Run();
}

}  // namespace zerofit::worker
