// The worker loop (worker/loop/worker_loop.h) with a fake training session against an in-process
// coordinator (real gRPC on loopback, the real Coordinator): what a rank does at every turn of a job, in
// seconds and without LibTorch. Each test names the behaviour it pins: the checkpoint cadence and the last
// step, resume at the step after the checkpoint, preemption at one step boundary on every rank, cancel, the
// out-of-memory report that makes the coordinator re-plan, and leaving when the coordinator goes silent.
#include "worker/loop/worker_loop.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "coordinator/service.h"
#include "core/dir_owner.h"
#include "jobspec/exit_codes.h"
#include "nlohmann/json.hpp"
#include "tests/support/temp_dir.h"

namespace zerofit::worker {
namespace {

constexpr char kToken[] = "loop-test-token-0123456789abcdef01";

// A barrier of `world` threads with a deadline, standing in for the host communicator's.
class ThreadBarrier {
 public:
  explicit ThreadBarrier(int world) : world_(world) {}
  absl::Status Wait(absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    const int64_t generation = generation_;
    if (++arrived_ == world_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return absl::OkStatus();
    }
    if (!cv_.wait_for(lock, absl::ToChronoMilliseconds(timeout), [&] { return generation_ != generation; })) {
      return absl::DeadlineExceededError("barrier: a rank did not arrive");
    }
    return absl::OkStatus();
  }

 private:
  const int world_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  int64_t generation_ = 0;
};

// What every rank's fake session saw and wrote: the "checkpoint" is the step a save recorded (from the
// owner extra), shared across attempts like a checkpoint directory.
struct Shared {
  std::mutex mu;
  std::map<int, std::vector<int64_t>> steps;        // rank -> steps run (all attempts)
  std::map<int, std::vector<size_t>> micro_counts;  // rank -> micro-batches per step
  std::map<int, std::vector<int64_t>> saves;        // rank -> steps saved
  std::map<int, std::vector<int64_t>> loads;        // rank -> steps a load returned
  std::map<int, int> evaluations, exports;
  int64_t checkpoint = -1;  // the last saved step (rank 0's view)
};

class FakeSession final : public TrainingSession {
 public:
  struct Behaviour {
    std::function<void(int rank, int64_t step)> during_step;   // runs inside Step, before the collective
    std::function<void(int rank, int64_t step)> after_step;    // runs inside Step, after the collective
    std::function<absl::Status(int rank, int64_t step)> fail;  // a non-OK status fails that step
    std::function<absl::Status(int rank, int64_t step)> save;  // a non-OK status fails that checkpoint
    bool sft = false;        // SFT's metrics: a perplexity, no accuracy or margin
    double eval_pairs = 10;  // 0: a job without held-out data
  };
  FakeSession(int rank, Shared* shared, ThreadBarrier* barrier, Behaviour b)
      : rank_(rank), shared_(shared), barrier_(barrier), b_(std::move(b)) {}

  std::vector<int64_t> TrainLengths() const override { return std::vector<int64_t>(40, 12); }
  std::string DataReportText() const override { return "40 pairs\nno lints"; }
  absl::StatusOr<metrics::StepMetrics> Step(int64_t step, const MicroBatches& micro) override {
    if (b_.during_step) b_.during_step(rank_, step);
    if (b_.fail) {
      if (absl::Status s = b_.fail(rank_, step); !s.ok()) return s;
    }
    // The step's collectives hold the ranks together, as the real engine's do.
    if (absl::Status s = barrier_->Wait(absl::Seconds(10)); !s.ok()) return s;
    {
      std::lock_guard<std::mutex> lock(shared_->mu);
      shared_->steps[rank_].push_back(step);
      shared_->micro_counts[rank_].push_back(micro.size());
    }
    if (b_.after_step) b_.after_step(rank_, step);
    metrics::StepMetrics m;
    m.step = step;
    m.rank = rank_;
    m.Set(metrics::metric_names::kLoss, 0.5);
    m.Set(metrics::metric_names::kLearningRate, 1e-3);
    if (b_.sft) {
      m.Set(metrics::metric_names::kSftPerplexity, 1.5);
      m.Set(metrics::metric_names::kSftTokenAccuracy, 0.625);
      return m;
    }
    m.Set(metrics::metric_names::kAccuracy, 0.75);
    m.Set(metrics::metric_names::kRewardMargin, 0.25);
    return m;
  }
  absl::StatusOr<std::vector<metrics::NamedValue>> Evaluate() override {
    std::lock_guard<std::mutex> lock(shared_->mu);
    ++shared_->evaluations[rank_];
    if (b_.sft) {
      return std::vector<metrics::NamedValue>{{"eval/loss", 0.4},
                                              {"eval/sft/perplexity", 1.25},
                                              {"eval/sft/mean_token_accuracy", 0.875},
                                              {"eval/pairs", b_.eval_pairs}};
    }
    return std::vector<metrics::NamedValue>{
        {"eval/loss", 0.4}, {"eval/accuracy", 0.8}, {"eval/pairs", b_.eval_pairs}};
  }
  absl::Status SaveCheckpoint(const std::string& dir, const std::string& extra, int keep) override {
    const int64_t step = nlohmann::json::parse(extra).at("step").get<int64_t>();
    if (absl::Status s = barrier_->Wait(absl::Seconds(10)); !s.ok()) return s;  // collective
    if (b_.save) {
      if (absl::Status s = b_.save(rank_, step); !s.ok()) return s;
    }
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->saves[rank_].push_back(step);
    if (rank_ == 0) shared_->checkpoint = step;
    return absl::OkStatus();
  }
  absl::StatusOr<int64_t> LoadCheckpoint(const std::string& dir) override {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->loads[rank_].push_back(shared_->checkpoint + 1);
    return shared_->checkpoint + 1;  // steps applied
  }
  absl::Status Export(const std::string& dir) override {
    std::lock_guard<std::mutex> lock(shared_->mu);
    ++shared_->exports[rank_];
    return absl::OkStatus();
  }

 private:
  const int rank_;
  Shared* shared_;
  ThreadBarrier* barrier_;
  Behaviour b_;
};

// `checkpoint_more`: more keys of the checkpoint mapping (", overwrite: true").
std::string Spec(int world, int64_t steps, const std::string& checkpoint_dir, const std::string& extra,
                 const std::string& checkpoint_more, const std::string& task) {
  const int global = 4 * world;  // micro_batch 2 x accumulation 2 x world
  return absl::StrCat("name: loop\ntask: ", task, "\nmodel: /m\ndata: /d\nworld_size: ", world,
                      "\nmax_restarts: 3\ntraining:\n  steps: ", steps, "\n  global_batch: ", global,
                      "\n  micro_batch: 2\n  gradient_accumulation: 2\neval: {every: 2}\ncheckpoint: {dir: ",
                      checkpoint_dir, ", every: 3, keep: 2", checkpoint_more, "}\n", extra);
}

struct Harness {
  core::RealClock clock;
  test_support::TempDir dir;
  std::unique_ptr<coordinator::CoordinatorServer> server;
  std::string job;
  Shared shared;
  absl::Duration retry_budget = absl::Seconds(1);  // how long a worker's call retries an absent coordinator

  // `extra`: more spec lines; `checkpoint_more`: more keys of its checkpoint mapping.
  Harness(int world, int64_t steps, const std::string& extra = "", const std::string& checkpoint_more = "",
          const std::string& task = "reward") {
    coordinator::ServerOptions o;
    o.db_path = ":memory:";
    o.token = kToken;
    o.policy.heartbeat_timeout = absl::Seconds(10);
    o.tick = absl::Milliseconds(50);
    auto s = coordinator::CoordinatorServer::Start(o, &clock);
    EXPECT_TRUE(s.ok()) << s.status();
    server = std::move(*s);
    auto submitted = server->coordinator().Submit(
        "req-loop", "loop", Spec(world, steps, CheckpointDir(), extra, checkpoint_more, task), "");
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    job = submitted->job.id;
  }
  std::string CheckpointDir() const { return dir.path() + "/ck"; }
  client::ConnectionOptions Connection() const {
    client::ConnectionOptions c;
    c.address = server->address();
    c.token = kToken;
    c.retry.budget = retry_budget;
    return c;
  }
  // Runs one attempt of `world` ranks (threads), each with its own loop and fake session; returns each
  // rank's result.
  std::vector<absl::StatusOr<int>> Attempt(int world, FakeSession::Behaviour behaviour = {},
                                           absl::Duration silence_limit = absl::Seconds(30),
                                           const std::function<void(WorkerLoopOptions&)>& adjust = {}) {
    ThreadBarrier barrier(world);
    std::vector<absl::StatusOr<int>> results(world, absl::UnknownError("not run"));
    std::vector<std::thread> ranks;
    for (int r = 0; r < world; ++r) {
      ranks.emplace_back([&, r] {
        const client::CoordinatorClient coordinator{Connection()};
        WorkerLoopOptions o;
        o.rank = r;
        o.world_size = world;
        o.hostname = "node1";
        o.launched_as = "test";
        o.heartbeat_period = absl::Milliseconds(20);
        o.coordinator_silence_limit = silence_limit;
        o.barrier_timeout = absl::Seconds(10);
        o.barrier = [&](absl::Duration t) { return barrier.Wait(t); };
        o.make_session = [&, r](const jobspec::JobPlan&,
                                const AttemptContext&) -> absl::StatusOr<std::unique_ptr<TrainingSession>> {
          return std::make_unique<FakeSession>(r, &shared, &barrier, behaviour);
        };
        if (adjust) adjust(o);
        WorkerLoop loop(std::move(o), &coordinator, job);
        results[r] = loop.Run();
      });
    }
    for (std::thread& t : ranks) t.join();
    return results;
  }
  coordinator::JobRecord Record() {
    auto r = server->coordinator().Get(job);
    EXPECT_TRUE(r.ok()) << r.status();
    return *r;
  }
  std::string Log() {
    auto lines = server->coordinator().WaitLogs(job, 0, absl::ZeroDuration());
    std::string text;
    if (lines.ok())
      for (const auto& l : *lines) absl::StrAppend(&text, l.text, "\n");
    return text;
  }
};

std::vector<int64_t> Range(int64_t from, int64_t to) {  // [from, to)
  std::vector<int64_t> v;
  for (int64_t s = from; s < to; ++s) v.push_back(s);
  return v;
}

TEST(WorkerLoopTest, TrainsEveryStepCheckpointsOnCadenceAndAfterTheLastStepThenExports) {
  Harness h(/*world=*/2, /*steps=*/7);
  for (const auto& r : h.Attempt(2)) ASSERT_TRUE(r.ok() && *r == 0) << r.status();
  for (int rank : {0, 1}) {
    EXPECT_EQ(h.shared.steps[rank], Range(0, 7));
    EXPECT_EQ(h.shared.saves[rank], (std::vector<int64_t>{2, 5, 6}));  // every 3 steps, and the last
    EXPECT_EQ(h.shared.evaluations[rank], 4);                          // after steps 1, 3, 5 and 6
    EXPECT_EQ(h.shared.exports[rank], 0);                              // the plan has no export dir
    EXPECT_TRUE(h.shared.loads[rank].empty());
  }
  const coordinator::JobRecord job = h.Record();
  EXPECT_EQ(job.status.phase, coordinator::JobPhase::kSucceeded) << job.status.reason;
  EXPECT_EQ(job.status.checkpoint_step, 6);
  const std::string log = h.Log();
  EXPECT_NE(log.find("step 7/7  loss 0.5000  acc 0.750  margin 0.250  lr 1.000e-03"), std::string::npos)
      << log;
  EXPECT_NE(log.find("(checkpoint step 6)  | eval: held-out acc 0.800 loss 0.4000 (10 pairs)"),
            std::string::npos);
  EXPECT_NE(log.find("data: no lints"), std::string::npos);
  EXPECT_NE(log.find("done: held-out accuracy 0.800 over 10 pairs"), std::string::npos);
  auto rows = h.server->coordinator().Metrics(h.job, -1);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->size(), 14u);  // 7 steps x 2 ranks
}

// An SFT job's lines name its examples, perplexity and token accuracy (TRL's mean_token_accuracy): it has no
// pairwise accuracy or margin to print.
TEST(WorkerLoopTest, AnSftJobsLinesShowItsPerplexity) {
  Harness h(/*world=*/2, /*steps=*/3, "", "", "sft");
  FakeSession::Behaviour sft;
  sft.sft = true;
  for (const auto& r : h.Attempt(2, sft)) ASSERT_TRUE(r.ok() && *r == 0) << r.status();
  const std::string log = h.Log();
  EXPECT_NE(log.find("attempt 1: 40 training examples, steps 0..2"), std::string::npos) << log;
  EXPECT_NE(log.find("step 2/3  loss 0.5000  ppl 1.500  tok-acc 0.625  lr 1.000e-03"), std::string::npos)
      << log;
  EXPECT_NE(log.find("| eval: held-out ppl 1.250  tok-acc 0.875 loss 0.4000 (10 examples)"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("done: held-out perplexity 1.250, token accuracy 0.875 over 10 examples"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find(" acc "), std::string::npos) << "no pairwise accuracy: " << log;
}

// Without held-out data (no data.test) the evaluations have nothing to show: no "held-out" figure of 0
// examples, and the last line says so.
TEST(WorkerLoopTest, AJobWithoutHeldOutDataSaysSoInsteadOfAFigureOfNothing) {
  for (const bool sft : {false, true}) {
    Harness h(/*world=*/2, /*steps=*/3, "", "", sft ? "sft" : "reward");
    FakeSession::Behaviour none;
    none.sft = sft;
    none.eval_pairs = 0;
    for (const auto& r : h.Attempt(2, none)) ASSERT_TRUE(r.ok() && *r == 0) << r.status();
    const std::string log = h.Log();
    EXPECT_EQ(log.find("| eval"), std::string::npos) << log;
    EXPECT_EQ(log.find("over 0"), std::string::npos) << log;
    EXPECT_NE(log.find("done: no held-out data to evaluate (data.test)"), std::string::npos) << log;
  }
}

// checkpoint.overwrite: a job starting from step 0 in a checkpoint.dir an earlier zerofit job left (its
// marker, a step folder, `latest`) trains: rank 0 removes that job's folders and says so in the log, the
// user's unmarked folder stays. Without the removal, the earlier `latest` would be refused as not a
// readable checkpoint.
TEST(WorkerLoopTest, OverwriteReplacesAnEarlierJobsCheckpointsAndKeepsTheUsersFiles) {
  Harness h(/*world=*/2, /*steps=*/4, "", ", overwrite: true");
  const std::filesystem::path ck = h.CheckpointDir();
  const core::DirOwner earlier{"job-000007", "req-earlier"};
  std::filesystem::create_directories(ck / "step-00000009");
  std::filesystem::create_directories(ck / "mine");
  std::ofstream(ck / "mine" / "notes.txt") << "the user's";
  ASSERT_TRUE(core::WriteDirOwner(ck.string(), earlier).ok());
  ASSERT_TRUE(core::WriteDirOwner((ck / "step-00000009").string(), earlier).ok());
  std::ofstream(ck / "latest") << "step-00000009\n";
  for (const auto& r : h.Attempt(2)) ASSERT_TRUE(r.ok() && *r == 0) << r.status();
  EXPECT_EQ(h.Record().status.phase, coordinator::JobPhase::kSucceeded) << h.Record().status.reason;
  EXPECT_NE(h.Log().find(absl::StrCat("checkpoint.overwrite: removed an earlier job's checkpoints: ",
                                      (ck / "step-00000009").string())),
            std::string::npos)
      << h.Log();
  EXPECT_FALSE(std::filesystem::exists(ck / "step-00000009"));
  EXPECT_TRUE(std::filesystem::exists(ck / "mine" / "notes.txt"));
  auto owner = core::ReadDirOwner(ck.string());
  ASSERT_TRUE(owner.ok()) << owner.status();
  EXPECT_EQ(owner->request, "req-loop");
}

TEST(WorkerLoopTest, AFailedAttemptResumesAtTheStepAfterItsCheckpoint) {
  Harness h(/*world=*/1, /*steps=*/9);
  FakeSession::Behaviour crash;
  crash.fail = [](int, int64_t step) {
    return step == 4 ? absl::InternalError("simulated crash") : absl::OkStatus();
  };
  auto first = h.Attempt(1, crash);
  ASSERT_FALSE(first[0].ok());
  EXPECT_NE(first[0].status().message().find("simulated crash"), std::string::npos);
  ASSERT_TRUE(h.server->coordinator().LauncherExited(h.job, 1).ok());
  EXPECT_EQ(h.Record().status.phase, coordinator::JobPhase::kRestarting) << h.Record().status.reason;

  auto second = h.Attempt(1);
  ASSERT_TRUE(second[0].ok() && *second[0] == 0) << second[0].status();
  // Steps 0-3 in attempt 1 (checkpoint at 2, step 4 failed), then 3-8: step 3 again, nothing skipped.
  EXPECT_EQ(h.shared.steps[0], (std::vector<int64_t>{0, 1, 2, 3, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(h.shared.loads[0], (std::vector<int64_t>{3}));
  EXPECT_EQ(h.shared.saves[0], (std::vector<int64_t>{2, 5, 8}));
  EXPECT_EQ(h.Record().status.phase, coordinator::JobPhase::kSucceeded);
  EXPECT_NE(h.Log().find("attempt 2: 40 training pairs, steps 3..8"), std::string::npos) << h.Log();
}

TEST(WorkerLoopTest, PreemptionCheckpointsTheStepBeforeTheStopStepOnEveryRank) {
  Harness h(/*world=*/2, /*steps=*/9);
  FakeSession::Behaviour preempt;
  preempt.during_step = [&](int rank, int64_t step) {
    if (rank == 0 && step == 3) {
      ASSERT_EQ(*h.server->coordinator().Preempt(h.job, "test"), 4);
    }
  };
  for (const auto& r : h.Attempt(2, preempt)) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(*r, jobspec::kPreemptedExitCode);
  }
  for (int rank : {0, 1}) {
    EXPECT_EQ(h.shared.steps[rank], Range(0, 4));                   // no rank ran the stop step
    EXPECT_EQ(h.shared.saves[rank], (std::vector<int64_t>{2, 3}));  // the cadence, then the step before stop
  }
  EXPECT_EQ(h.Record().status.checkpoint_step, 3);
  EXPECT_NE(h.Log().find("preempted before step 4: checkpoint at step 3; exiting with code 75"),
            std::string::npos)
      << h.Log();
}

TEST(WorkerLoopTest, CancelStopsAtTheNextStepBoundaryWithoutWritingAnything) {
  Harness h(/*world=*/1, /*steps=*/9);
  FakeSession::Behaviour cancel;
  cancel.during_step = [&](int, int64_t step) {
    if (step == 3) {
      ASSERT_TRUE(h.server->coordinator().Cancel(h.job, "test").ok());
    }
  };
  auto r = h.Attempt(1, cancel);
  ASSERT_TRUE(r[0].ok() && *r[0] == 0) << r[0].status();
  EXPECT_EQ(h.shared.steps[0], Range(0, 4));                // step 3 finishes, step 4 never starts
  EXPECT_EQ(h.shared.saves[0], (std::vector<int64_t>{2}));  // nothing after the cancel
  EXPECT_EQ(h.shared.exports[0], 0);
  EXPECT_EQ(h.shared.evaluations[0], 2);  // after steps 1 and 3; none at the end
  EXPECT_EQ(h.Record().status.phase, coordinator::JobPhase::kCancelled);
  EXPECT_NE(h.Log().find("stopping before step 4: the job was cancelled"), std::string::npos) << h.Log();
}

// Issue 29: the cancel comes while rank 0 already holds step 4 (it waits in the step's collective) and rank 1
// is still finishing step 3 (its heartbeats have seen the cancel): rank 1 must still run step 4, or rank 0
// waits for it until the collective's deadline. Both stop before step 5, at once.
TEST(WorkerLoopTest, ACancelBetweenTheRanksStepRequestsStopsEveryRankAtOneStep) {
  Harness h(/*world=*/2, /*steps=*/9);
  std::mutex mu;
  std::condition_variable cv;
  bool cancelled = false;
  FakeSession::Behaviour cancel;
  cancel.during_step = [&](int rank, int64_t step) {
    if (rank != 0 || step != 4) return;
    ASSERT_TRUE(h.server->coordinator().Cancel(h.job, "test").ok());
    std::lock_guard<std::mutex> lock(mu);
    cancelled = true;
    cv.notify_all();
  };
  cancel.after_step = [&](int rank, int64_t step) {
    if (rank != 1 || step != 3) return;
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return cancelled; }));
    lock.unlock();
    absl::SleepFor(absl::Milliseconds(200));  // 10 heartbeat periods: rank 1's heartbeats answered `cancel`
  };
  const absl::Time t0 = absl::Now();
  const auto results = h.Attempt(2, cancel);
  for (int rank : {0, 1}) {
    ASSERT_TRUE(results[rank].ok() && *results[rank] == 0)
        << "rank " << rank << ": " << results[rank].status();
    EXPECT_EQ(h.shared.steps[rank], Range(0, 5)) << "rank " << rank;  // step 4 on both, nothing after
    EXPECT_EQ(h.shared.saves[rank], (std::vector<int64_t>{2})) << "rank " << rank;  // nothing at the stop
  }
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5)) << "no rank waited for a collective's deadline";
  EXPECT_EQ(h.Record().status.phase, coordinator::JobPhase::kCancelled);
  const std::string log = h.Log();
  EXPECT_NE(log.find("ranks stop before step 5"), std::string::npos) << log;
  const std::string stop = "stopping before step 5: the job was cancelled";
  const size_t first = log.find(stop);
  ASSERT_NE(first, std::string::npos) << log;
  EXPECT_NE(log.find(stop, first + 1), std::string::npos) << "both ranks stop there\n" << log;
}

TEST(WorkerLoopTest, AHungRankIsAbortedFromItsHeartbeatThreadAndTheNextAttemptResumes) {
  Harness h(/*world=*/1, /*steps=*/9, "watchdog: {step_time_factor: 10, floor_s: 1}\n");
  // Step 4 blocks (a collective that never returns) until the heartbeat thread gives up on it: it returns
  // only once exit_after_abort ran, abort_grace after the abort.
  std::mutex mu;
  std::condition_variable cv;
  bool aborted = false, exited = false;
  FakeSession::Behaviour hang;
  hang.fail = [&](int, int64_t step) -> absl::Status {
    if (step != 4) return absl::OkStatus();
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, std::chrono::seconds(20), [&] { return exited; })) {
      return absl::DeadlineExceededError("never aborted");
    }
    return absl::AbortedError("collective aborted");
  };
  const absl::Time t0 = absl::Now();
  auto r = h.Attempt(1, hang, absl::Seconds(30), [&](WorkerLoopOptions& o) {
    o.abort_grace = absl::Milliseconds(300);
    o.abort = [&] {
      std::lock_guard<std::mutex> lock(mu);
      aborted = true;
    };
    o.exit_after_abort = [&] {
      std::lock_guard<std::mutex> lock(mu);
      exited = aborted;  // only after the abort
      cv.notify_all();
    };
  });
  ASSERT_FALSE(r[0].ok());
  EXPECT_EQ(r[0].status().code(), absl::StatusCode::kAborted) << r[0].status();
  EXPECT_LT(absl::Now() - t0, absl::Seconds(10));
  EXPECT_TRUE(exited);
  const std::string log = h.Log();
  for (const char* want :
       {"restarting: rank 0 (host node1) hung while its heartbeats arrived (limit 1s = max(10 x median",
        "since it completed step 3; it was doing: attempt 1, step 4: compute for ",
        "aborting: the coordinator ended attempt 1; this rank was at attempt 1, step 4: compute"}) {
    EXPECT_NE(log.find(want), std::string::npos) << want << "\n" << log;
  }
  EXPECT_EQ(h.shared.saves[0], (std::vector<int64_t>{2}));  // nothing written after the abort
  EXPECT_EQ(h.Record().status.phase, coordinator::JobPhase::kRestarting);
  EXPECT_EQ(h.Record().status.checkpoint_step, 2);
  // The next attempt resumes after the checkpoint and finishes.
  auto again = h.Attempt(1);
  ASSERT_TRUE(again[0].ok() && *again[0] == 0) << again[0].status();
  EXPECT_EQ(h.Record().status.phase, coordinator::JobPhase::kSucceeded) << h.Record().status.reason;
  EXPECT_EQ(h.shared.loads[0], (std::vector<int64_t>{3}));
}

TEST(WorkerLoopTest, NoCheckpointIsWrittenAfterAnAbort) {
  Harness h(/*world=*/1, /*steps=*/9, "watchdog: {step_time_factor: 10, floor_s: 1}\n");
  // Step 5 (a checkpoint step: every 3) stalls until the abort arrives, then completes normally: the
  // checkpoint that would follow must not be written.
  std::mutex mu;
  std::condition_variable cv;
  bool aborted = false;
  FakeSession::Behaviour stall;
  stall.during_step = [&](int, int64_t step) {
    if (step != 5) return;
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(20), [&] { return aborted; });
  };
  auto r = h.Attempt(1, stall, absl::Seconds(30), [&](WorkerLoopOptions& o) {
    o.abort = [&] {
      std::lock_guard<std::mutex> lock(mu);
      aborted = true;
      cv.notify_all();
    };
  });
  ASSERT_FALSE(r[0].ok());
  EXPECT_EQ(r[0].status().code(), absl::StatusCode::kAborted) << r[0].status();
  EXPECT_NE(r[0].status().message().find("the checkpoint of step 5 aborted"), std::string::npos)
      << r[0].status();
  EXPECT_EQ(h.shared.steps[0], Range(0, 6));
  EXPECT_EQ(h.shared.saves[0], (std::vector<int64_t>{2}));
  EXPECT_EQ(h.Record().status.checkpoint_step, 2);
}

// A checkpoint that fails on one rank (a full disk) fails the attempt with that rank's error in the job's
// reason, not only in the rank's stderr: "the launcher exited with code 1" alone does not say what to mend.
// The peer, which learns only that another rank failed, reports first, and still the reason names the cause.
TEST(WorkerLoopTest, AFailedCheckpointIsTheAttemptsReasonWhicheverRankReportsFirst) {
  Harness h(/*world=*/2, /*steps=*/9);
  FakeSession::Behaviour full_disk;
  full_disk.save = [&](int rank, int64_t step) -> absl::Status {
    if (step != 5) return absl::OkStatus();
    if (rank == 0) return absl::AbortedError("checkpoint: another rank failed (see its log)");
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (h.Log().find("another rank failed") == std::string::npos && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    return absl::ResourceExhaustedError(
        "ck/step-00000005.tmp/rank-00001.safetensors: No space left on device");
  };
  const auto results = h.Attempt(2, full_disk);
  EXPECT_EQ(results[0].status().code(), absl::StatusCode::kAborted) << results[0].status();
  EXPECT_EQ(results[1].status().code(), absl::StatusCode::kResourceExhausted) << results[1].status();
  EXPECT_NE(h.Log().find("the checkpoint of step 5 failed: checkpoint: another rank failed"),
            std::string::npos)
      << h.Log();
  // Rank 0's report did not end the attempt; rank 1's did, and the launcher's exit after it changes nothing.
  ASSERT_TRUE(h.server->coordinator().LauncherExited(h.job, 1).ok());
  const coordinator::JobRecord job = h.Record();
  EXPECT_EQ(job.status.phase, coordinator::JobPhase::kRestarting);
  EXPECT_EQ(job.status.restarts, 1);
  EXPECT_EQ(job.status.checkpoint_step, 2);
  EXPECT_EQ(job.status.reason,
            "rank 1 (host node1) exited with code 1: rank 1: the checkpoint of step 5 failed: "
            "ck/step-00000005.tmp/rank-00001.safetensors: No space left on device");
}

TEST(WorkerLoopTest, OutOfMemoryIsReportedAndTheNextAttemptGetsSmallerMicroBatches) {
  Harness h(/*world=*/1, /*steps=*/4);
  FakeSession::Behaviour oom;
  oom.fail = [](int, int64_t step) {
    return step == 1 ? absl::ResourceExhaustedError("CUDA out of memory (simulated)") : absl::OkStatus();
  };
  auto first = h.Attempt(1, oom);
  ASSERT_EQ(first[0].status().code(), absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(h.server->coordinator().LauncherExited(h.job, 1).ok());
  EXPECT_EQ(h.Record().status.phase, coordinator::JobPhase::kRestarting);

  auto second = h.Attempt(1);
  ASSERT_TRUE(second[0].ok()) << second[0].status();
  // Attempt 1 ran step 0 with 2 micro-batches of 2; the re-plan halves them (4 micro-batches of 1, the same
  // global batch) and attempt 2 starts over (no checkpoint yet).
  EXPECT_EQ(h.shared.steps[0], (std::vector<int64_t>{0, 0, 1, 2, 3}));
  EXPECT_EQ(h.shared.micro_counts[0], (std::vector<size_t>{2, 4, 4, 4, 4}));
  EXPECT_NE(h.Log().find("step 1 failed: CUDA out of memory (simulated)"), std::string::npos) << h.Log();
}

TEST(WorkerLoopTest, LeavesWhenTheCoordinatorGoesSilent) {
  Harness h(/*world=*/1, /*steps=*/50);
  // Calls would retry for a minute; the heartbeats' silence limit ends the rank long before that.
  h.retry_budget = absl::Minutes(1);
  FakeSession::Behaviour vanish;
  vanish.during_step = [&](int, int64_t step) {
    if (step != 2) return;
    h.server.reset();                         // the coordinator dies (its port closes)
    absl::SleepFor(absl::Milliseconds(900));  // a long step: heartbeats go unanswered
  };
  const absl::Time start = absl::Now();
  auto r = h.Attempt(1, vanish, /*silence_limit=*/absl::Milliseconds(500));
  ASSERT_FALSE(r[0].ok());
  EXPECT_EQ(r[0].status().code(), absl::StatusCode::kUnavailable) << r[0].status();
  EXPECT_NE(r[0].status().message().find("has not answered a heartbeat"), std::string::npos) << r[0].status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_EQ(h.shared.steps[0], Range(0, 3));  // no step after the coordinator vanished
}

}  // namespace
}  // namespace zerofit::worker
