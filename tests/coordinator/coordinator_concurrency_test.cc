// The Coordinator class (no gRPC) under concurrent use, as the service drives it: the ranks of a job
// register, heartbeat, acquire steps and report from their own threads while a follower waits for log lines,
// a watcher for status changes, and the ticker checks heartbeats. Run by the TSan tier (scripts/test.sh),
// which cannot instrument gRPC: this is where the coordinator's own locking is checked for races; in the
// normal build it checks that every rank sees the same assignment and the job succeeds.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/coordinator.h"
#include "coordinator/job_store.h"

namespace zerofit::coordinator {
namespace {

constexpr int kWorld = 4;
constexpr int64_t kSteps = 30;

std::string Spec() {
  return "name: c\ntask: reward\nmodel: /m\ndata: /d\nworld_size: 4\nmax_restarts: 1\ntraining:\n  steps: "
         "30\n"
         "  global_batch: 16\n  micro_batch: 2\n  gradient_accumulation: 2\n";
}

TEST(CoordinatorConcurrencyTest, RanksFollowersAndTheTickerShareOneJob) {
  core::RealClock clock;
  auto store = JobStore::Open(":memory:");
  ASSERT_TRUE(store.ok()) << store.status();
  JobPolicy policy;
  policy.heartbeat_timeout = absl::Seconds(30);
  auto c = Coordinator::Create(std::move(*store), &clock, policy);
  ASSERT_TRUE(c.ok()) << c.status();
  Coordinator& co = **c;
  auto submitted = co.Submit("req", "c", Spec(), "spec.yaml");
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const std::string job = submitted->job.id;

  std::atomic<bool> done{false};
  std::atomic<int> registered{0};
  std::vector<std::thread> threads;
  std::vector<std::vector<std::vector<uint64_t>>> seen(kWorld);  // rank -> step -> its samples
  for (int rank = 0; rank < kWorld; ++rank) {
    threads.emplace_back([&, rank] {
      std::vector<int64_t> lengths;
      if (rank == 0) lengths.assign(64, 10);
      ASSERT_TRUE(co.Register(job, rank, kWorld, "node", lengths).ok());
      // As the workers do (worker_loop.h): every rank registered before any asks for a step.
      registered.fetch_add(1);
      while (registered.load() < kWorld) std::this_thread::yield();
      for (int64_t step = 0; step < kSteps; ++step) {
        ASSERT_TRUE(co.Heartbeat(job, HeartbeatInfo{rank, 0, ""}).ok());
        const absl::StatusOr<StepGrant> grant = co.AcquireStep(job, step);  // rank 0's lengths are in
        ASSERT_TRUE(grant.ok()) << grant.status();
        ASSERT_NE(grant->assignment, nullptr);
        std::vector<uint64_t> mine;
        for (const auto& micro : grant->assignment->ranks[rank])
          mine.insert(mine.end(), micro.begin(), micro.end());
        seen[rank].push_back(mine);
        WorkerReport r;
        r.rank = rank;
        r.host = "node";
        r.step = step;
        r.loss = 0.5;
        r.log_lines = {"step " + std::to_string(step)};
        r.checkpoint_step = rank == 0 && step % 10 == 9 ? step : -1;
        ASSERT_TRUE(co.Report(job, r).ok());
      }
      WorkerReport last;
      last.rank = rank;
      last.finished = true;
      ASSERT_TRUE(co.Report(job, last).ok());
    });
  }
  threads.emplace_back([&] {  // `zerofit logs -f`
    int64_t after = 0;
    while (!done.load()) {
      auto lines = co.WaitLogs(job, after, absl::Milliseconds(20));
      ASSERT_TRUE(lines.ok());
      if (!lines->empty()) after = lines->back().seq;
    }
  });
  threads.emplace_back([&] {  // `zerofit status --watch` and the ticker
    while (!done.load()) {
      auto record = co.Get(job);
      ASSERT_TRUE(record.ok());
      ASSERT_TRUE(co.WaitStatus(job, record->status, absl::Milliseconds(5)).ok());
      ASSERT_TRUE(co.Tick().ok());
      ASSERT_TRUE(co.Metrics(job, -1).ok());
    }
  });
  for (int rank = 0; rank < kWorld; ++rank) threads[rank].join();
  done.store(true);
  co.Shutdown();
  threads[kWorld].join();
  threads[kWorld + 1].join();

  auto record = co.Get(job);
  ASSERT_TRUE(record.ok());
  EXPECT_EQ(record->status.phase, JobPhase::kSucceeded) << record->status.reason;
  EXPECT_EQ(record->status.checkpoint_step, 29);
  // Every step's samples split over the ranks: no sample twice within a step.
  for (int64_t step = 0; step < kSteps; ++step) {
    std::vector<uint64_t> all;
    for (int rank = 0; rank < kWorld; ++rank)
      all.insert(all.end(), seen[rank][step].begin(), seen[rank][step].end());
    std::sort(all.begin(), all.end());
    EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << "step " << step;
    EXPECT_EQ(all.size(), 16u) << "step " << step;
  }
}

}  // namespace
}  // namespace zerofit::coordinator
