#include "worker/loop/run_worker.h"

#include <utility>

#include "client/kv_rendezvous.h"
#include "worker/loop/coordinator_link.h"
#include "worker/loop/worker_loop.h"

namespace zerofit::worker {

absl::StatusOr<int> RunWorker(WorkerLoopOptions options, const client::ConnectionOptions& connection,
                              const std::string& job) {
  CoordinatorLink link(connection, job);
  // Outlives the loop, and so every session (and NCCL bootstrap) the loop builds.
  client::KvRendezvous rendezvous(link.connection(), job);
  WorkerLoop loop(std::move(options), &link, &rendezvous);
  return loop.Run();
}

}  // namespace zerofit::worker
