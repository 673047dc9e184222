// A Slurm job with slurm.on_node_loss: shrink (issue 20), through the Coordinator on a fake clock: a requeued
// attempt forms on fewer ranks than the spec's, re-planned to the same global batch (more micro-batches per
// rank, the same pairs per micro-batch); the plan, the step grants, the log and the status say so; a
// coordinator restarted from its store keeps the shrunken plan; the job grows back when its nodes return;
// world sizes the spec does not allow are refused. And the pure sizing functions (attempt_plan.h).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/attempt_plan.h"
#include "coordinator/coordinator.h"
#include "coordinator/job_store.h"
#include "core/clock.h"
#include "jobspec/job_plan.h"
#include "jobspec/step_scheduler.h"

namespace zerofit::coordinator {
namespace {

// 2 nodes x 2 ranks, global batch 8 = 4 ranks x 1 micro-batch x 2 pairs; may shrink to 1 node.
std::string ShrinkSpec(const char* on_node_loss = "shrink") {
  return absl::StrCat(
      "name: s\ntask: reward\nmodel: /m\ndata: /d\nmax_restarts: 2\ntraining:\n  steps: 60\n  global_batch: "
      "8\n"
      "  micro_batch: 2\n  gradient_accumulation: 1\nslurm:\n  nodes: 2\n  tasks_per_node: 2\n  "
      "on_node_loss: ",
      on_node_loss, "\n", std::string(on_node_loss) == "shrink" ? "  min_nodes: 1\n" : "");
}

const std::vector<int64_t> kLengths(64, 10);

struct Fixture {
  explicit Fixture(const std::string& db = ":memory:", const std::string& spec = ShrinkSpec()) : db(db) {
    Open();
    auto submitted = co->Submit("req", "s", spec, "s.yaml");
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    job = submitted->job.id;
  }
  void Open() {
    co.reset();
    auto store = JobStore::Open(db);
    EXPECT_TRUE(store.ok()) << store.status();
    auto c = Coordinator::Create(std::move(*store), &clock);
    EXPECT_TRUE(c.ok()) << c.status();
    co = std::move(*c);
  }
  // Ranks 0..world-1, two per node (node1, node2, ...); returns the last registration.
  WorkerRegistration Register(int world) {
    WorkerRegistration last;
    for (int r = 0; r < world; ++r) {
      auto reg = co->Register(job, r, world, absl::StrCat("node", r / 2 + 1),
                              r == 0 ? kLengths : std::vector<int64_t>{});
      EXPECT_TRUE(reg.ok()) << reg.status();
      if (reg.ok()) last = *reg;
    }
    return last;
  }
  std::string Log() {
    std::string all;
    auto lines = co->WaitLogs(job, 0, absl::ZeroDuration());
    EXPECT_TRUE(lines.ok()) << lines.status();
    for (const LogLine& l : lines.value_or(std::vector<LogLine>{})) absl::StrAppend(&all, l.text, "\n");
    return all;
  }
  // Attempt 1 on 4 ranks checkpoints step 19, then Slurm requeues the job (node2 lost).
  void RunFullThenLoseNode2() {
    EXPECT_EQ(Register(4).attempt, 1);
    WorkerReport ck;
    ck.rank = 0;
    ck.attempt = 1;
    ck.host = "node1";
    ck.checkpoint_step = 19;
    EXPECT_TRUE(co->Report(job, ck).ok());
    EXPECT_TRUE(
        co->Interrupt(job, "SIGTERM from Slurm: job 3 requeued (lost node2 down* (Not responding))").ok());
  }
  std::string db;
  core::FakeClock clock;
  std::unique_ptr<Coordinator> co;
  std::string job;
};

std::vector<uint64_t> PairsOf(const jobspec::StepAssignment& a) {
  std::vector<uint64_t> all;
  for (const auto& rank : a.ranks) {
    for (const auto& micro : rank) all.insert(all.end(), micro.begin(), micro.end());
  }
  std::sort(all.begin(), all.end());
  return all;
}

TEST(CoordinatorShrinkTest, ARequeuedAttemptRunsOnTheNodesLeftWithTheSameGlobalBatch) {
  Fixture f;
  f.RunFullThenLoseNode2();
  const WorkerRegistration reg = f.Register(2);  // node1's two ranks
  EXPECT_EQ(reg.attempt, 2);
  EXPECT_EQ(reg.resume_step, 20);
  auto plan = jobspec::JobPlanFromJson(reg.plan, "registration");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->world_size, 2);
  EXPECT_EQ(plan->gradient_accumulation, 2) << "4 ranks x 1 -> 2 ranks x 2 micro-batches of 2 pairs";
  EXPECT_EQ(plan->global_batch, 8);

  auto j = f.co->Get(f.job);
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(j->status.phase, JobPhase::kRunning);
  EXPECT_EQ(j->status.world_size, 2);
  EXPECT_EQ(jobspec::JobPlanFromJson(j->plan, "job")->gradient_accumulation, 2);
  EXPECT_EQ(j->attempt_note, "2 of 4 ranks (1 node of 2: node2 lost)");
  EXPECT_NE(j->plan.find("\"world_size\": 2"), std::string::npos) << j->plan;
  EXPECT_NE(
      f.Log().find("attempt 2 running on 2 ranks (1 node of 2: node2 lost) from step 20: re-planned 2 x 2 "
                   "micro-batches x 2 pairs = global batch 8"),
      std::string::npos)
      << f.Log();

  // Step 20 trains the same 8 pairs the full world would have, on 2 ranks x 2 micro-batches of 2.
  auto grant = f.co->AcquireStep(f.job, 20, 0);
  ASSERT_TRUE(grant.ok()) << grant.status();
  const jobspec::StepAssignment& a = *grant->assignment;
  ASSERT_EQ(a.ranks.size(), 2u);
  for (const auto& rank : a.ranks) {
    ASSERT_EQ(rank.size(), 2u);
    for (const auto& micro : rank) EXPECT_EQ(micro.size(), 2u);
  }
  auto full = jobspec::StepScheduler::Create(kLengths, jobspec::SchedulerOptions{8, 4, 1});
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(PairsOf(a), PairsOf(full->Assign(20)));

  // Both ranks finishing is the whole attempt: the job succeeds (not waiting for the spec's 4).
  for (int r = 0; r < 2; ++r) {
    WorkerReport done;
    done.rank = r;
    done.attempt = 2;
    done.host = "node1";
    done.finished = true;
    ASSERT_TRUE(f.co->Report(f.job, done).ok());
  }
  j = f.co->Get(f.job);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->status.phase, JobPhase::kSucceeded) << j->status.reason;
}

TEST(CoordinatorShrinkTest, WorldSizesTheSpecDoesNotAllowAreRefused) {
  Fixture f;
  auto six = f.co->Register(f.job, 0, 6, "node1", kLengths);
  ASSERT_FALSE(six.ok());
  EXPECT_EQ(six.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(six.status().message().find("rank 0 of 6 does not fit job job-000001 (world_size 4; "
                                        "slurm.on_node_loss: shrink allows 2, 4)"),
            std::string::npos)
      << six.status();
  // A running attempt takes only its own size.
  f.Register(4);
  auto two = f.co->Register(f.job, 0, 2, "node1", kLengths);
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("attempt 1 of job job-000001 runs on 4 ranks"), std::string::npos)
      << two.status();
  // A job that waits for its nodes takes only the spec's world size.
  Fixture wait(":memory:", ShrinkSpec("wait"));
  auto small = wait.co->Register(wait.job, 0, 2, "node1", kLengths);
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.status().message().find("rank 0 of 2 does not fit job job-000001 (world_size 4)"),
            std::string::npos)
      << small.status();
}

TEST(CoordinatorShrinkTest, ARestartedCoordinatorKeepsTheShrunkenPlanAndTheJobGrowsBack) {
  const std::string db =
      (std::filesystem::temp_directory_path() / absl::StrCat("zerofit_shrink_", getpid(), ".db")).string();
  std::filesystem::remove(db);
  {
    Fixture f(db);
    f.RunFullThenLoseNode2();
    f.Register(2);
    // The coordinator goes (the allocation's first node is requeued with the job) and comes back from its
    // store: the running attempt's ranks reconnect and get the same shrunken plan and grants.
    f.Open();
    const WorkerRegistration again = f.Register(2);
    EXPECT_EQ(again.attempt, 2);
    auto plan = jobspec::JobPlanFromJson(again.plan, "registration");
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->gradient_accumulation, 2);
    auto grant = f.co->AcquireStep(f.job, 21, 0);
    ASSERT_TRUE(grant.ok()) << grant.status();
    EXPECT_EQ(grant->assignment->ranks.size(), 2u);
    EXPECT_EQ(grant->assignment->ranks[0].size(), 2u);
    auto j = f.co->Get(f.job);
    ASSERT_TRUE(j.ok());
    EXPECT_EQ(j->attempt_note, "2 of 4 ranks (1 node of 2: node2 lost)");
    // node2 is back at the next requeue: 4 ranks again, 1 micro-batch each.
    ASSERT_TRUE(f.co->Interrupt(f.job, "requeued").ok());
    const WorkerRegistration full = f.Register(4);
    plan = jobspec::JobPlanFromJson(full.plan, "registration");
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->world_size, 4);
    EXPECT_EQ(plan->gradient_accumulation, 1);
    j = f.co->Get(f.job);
    ASSERT_TRUE(j.ok());
    EXPECT_EQ(j->attempt_note, "") << "a full-size attempt tells no shrink";
    EXPECT_NE(f.Log().find("attempt 3 running on 4 ranks (2 nodes of 2) from step 20: re-planned 4 x 1 "
                           "micro-batches x 2 pairs = global batch 8"),
              std::string::npos)
        << f.Log();
  }
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db + suffix);
}

TEST(AttemptPlanTest, HostsAndNotesOfAnAttempt) {
  EXPECT_EQ(LostHosts({"node1", "node2", "node3"}, {"node1", "node3"}), (std::vector<std::string>{"node2"}));
  EXPECT_EQ(DescribeNodes(1, 3, {"node2", "node3"}), "1 node of 3: node2, node3 lost");
  EXPECT_EQ(DescribeNodes(2, 2, {}), "2 nodes of 2");
  EXPECT_EQ(DescribeReplan(8, 2, 2), "re-planned 2 x 2 micro-batches x 2 pairs = global batch 8");
  EXPECT_EQ(SplitHosts(JoinHosts(DistinctHosts({"a", "a", "b", ""}))), (std::vector<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace zerofit::coordinator
