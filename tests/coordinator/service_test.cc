// The Workers and Jobs services through real gRPC stubs on loopback, with simulated workers: registration
// forms an attempt, AcquireStep hands out the step's micro-batches, the rendezvous store waits with a
// deadline, reports finish the job; missed heartbeats and OOM restart it; calls without the token fail.
#include "coordinator/service.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/kv_rendezvous.h"
#include "comm/rendezvous.h"
#include "core/dir_owner.h"
#include "jobspec/job_plan.h"
#include "tests/coordinator/service_fixture.h"
#include "zerofit/v1/coordinator.grpc.pb.h"

namespace zerofit::coordinator {
namespace {

using service_test::ConnectionTo;
using service_test::Fixture;
using service_test::kSpec;
namespace v1 = ::zerofit::v1;

TEST(ServiceTest, WorkersFormAnAttemptAcquireStepsRendezvousAndFinish) {
  Fixture f;
  EXPECT_EQ(f.Register(0).attempt(), 1);
  EXPECT_EQ(f.Get().phase(), v1::QUEUED) << "one of two ranks";
  const v1::RegisterWorkerResponse r1 = f.Register(1);
  EXPECT_EQ(r1.attempt(), 1);
  EXPECT_EQ(r1.resume_step(), 0);
  EXPECT_EQ(f.Get().phase(), v1::RUNNING);
  // Step 3's samples: 8 over both ranks, 2 micro-batches each, nothing twice.
  std::set<uint64_t> samples;
  for (int rank = 0; rank < 2; ++rank) {
    v1::AcquireStepRequest req;
    req.set_job_id(f.job);
    req.set_rank(rank);
    req.set_step(3);
    v1::AcquireStepResponse resp;
    auto ctx = f.Context();
    ASSERT_TRUE(f.workers->AcquireStep(ctx.get(), req, &resp).ok());
    ASSERT_EQ(resp.micro_batches_size(), 2);
    for (const auto& mb : resp.micro_batches()) samples.insert(mb.samples().begin(), mb.samples().end());
  }
  EXPECT_EQ(samples.size(), 8u);
  // Rendezvous: rank 1 waits for the key rank 0 puts a moment later.
  std::thread putter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    v1::KeyValue kv;
    kv.set_job_id(f.job);
    kv.set_key("nccl_unique_id");
    kv.set_value(std::string("\x01\x02\x00\x03", 4));
    v1::KeyValue out;
    auto ctx = f.Context();
    EXPECT_TRUE(f.workers->KvPut(ctx.get(), kv, &out).ok());
  });
  v1::KvGetRequest get;
  get.set_job_id(f.job);
  get.set_key("nccl_unique_id");
  get.set_timeout_ms(5000);
  v1::KeyValue got;
  auto ctx = f.Context();
  ASSERT_TRUE(f.workers->KvGet(ctx.get(), get, &got).ok());
  EXPECT_EQ(got.value(), std::string("\x01\x02\x00\x03", 4));
  putter.join();
  get.set_key("never");
  get.set_timeout_ms(100);
  auto ctx2 = f.Context();
  EXPECT_EQ(f.workers->KvGet(ctx2.get(), get, &got).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // Both ranks finish: the job succeeds and its log has every rank's lines.
  f.Report(0, 19, 19, true);
  EXPECT_EQ(f.Get().phase(), v1::RUNNING);
  f.Report(1, 19, 19, true);
  const v1::Job done = f.Get();
  EXPECT_EQ(done.phase(), v1::SUCCEEDED);
  EXPECT_EQ(done.checkpoint_step(), 19);
  v1::StreamLogsRequest lreq;
  lreq.set_job_id(f.job);
  auto lctx = f.Context();
  auto reader = f.jobs->StreamLogs(lctx.get(), lreq);
  v1::LogLine line;
  int step_lines = 0;
  while (reader->Read(&line)) step_lines += line.text() == "step 19";
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(step_lines, 2);
}

// Named metrics travel Report -> store -> StreamMetrics in order and exactly; a report with a bad name is
// refused and stores nothing.
TEST(ServiceTest, NamedMetricsAreStoredAndStreamedBack) {
  Fixture f;
  f.Register(0);
  f.Register(1);
  v1::ReportRequest req;
  req.set_job_id(f.job);
  req.set_rank(1);
  req.set_step(0);
  req.set_loss(0.69);
  const std::vector<std::pair<std::string, double>> named = {
      {"loss", 0.69}, {"lr", 2.5e-4}, {"time/reduce_scatter_ms", 1.5}, {"reward/margin", -0.125}};
  for (const auto& [name, value] : named) {
    v1::NamedValue* v = req.add_metrics();
    v->set_name(name);
    v->set_value(value);
  }
  v1::ReportResponse resp;
  auto ctx = f.Context();
  ASSERT_TRUE(f.workers->Report(ctx.get(), req, &resp).ok());
  req.set_step(1);
  req.add_metrics()->set_name("bad name");
  auto bad_ctx = f.Context();
  EXPECT_EQ(f.workers->Report(bad_ctx.get(), req, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  v1::StreamMetricsRequest mreq;
  mreq.set_job_id(f.job);
  mreq.set_after_step(-1);
  auto mctx = f.Context();
  auto reader = f.jobs->StreamMetrics(mctx.get(), mreq);
  std::vector<v1::Metric> rows;
  v1::Metric m;
  while (reader->Read(&m)) rows.push_back(m);
  EXPECT_TRUE(reader->Finish().ok());
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].step(), 0);
  EXPECT_EQ(rows[0].loss(), 0.69);  // the fixed fields stay filled
  ASSERT_EQ(rows[0].values_size(), static_cast<int>(named.size()));
  for (size_t i = 0; i < named.size(); ++i) {
    EXPECT_EQ(rows[0].values(static_cast<int>(i)).name(), named[i].first);
    EXPECT_EQ(rows[0].values(static_cast<int>(i)).value(), named[i].second);
  }
}

TEST(ServiceTest, MissedHeartbeatsAndOomRestartFromTheCheckpoint) {
  Fixture f(absl::Milliseconds(300));
  f.Register(0);
  f.Register(1);
  f.Report(0, 5, 5, false);  // checkpoint at step 5
  // Only rank 0 keeps beating.
  for (int i = 0; i < 20 && f.Get().phase() == v1::RUNNING; ++i) {
    v1::HeartbeatRequest hb;
    hb.set_job_id(f.job);
    hb.set_rank(0);
    v1::HeartbeatResponse resp;
    auto ctx = f.Context();
    ASSERT_TRUE(f.workers->Heartbeat(ctx.get(), hb, &resp).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  v1::Job j = f.Get();
  ASSERT_EQ(j.phase(), v1::RESTARTING);
  EXPECT_NE(j.reason().find("rank 1 (host node1) missed heartbeats"), std::string::npos) << j.reason();
  // The next attempt resumes after the checkpoint.
  EXPECT_EQ(f.Register(0).attempt(), 2);
  EXPECT_EQ(f.Register(1).resume_step(), 6);
  EXPECT_EQ(f.Get().phase(), v1::RUNNING);
  // An out-of-memory report restarts again and asks for a re-plan.
  f.Report(1, 7, -1, false, /*oom=*/true);
  j = f.Get();
  EXPECT_EQ(j.phase(), v1::RESTARTING);
  EXPECT_EQ(j.restarts(), 2);
  EXPECT_NE(j.reason().find("out of memory"), std::string::npos);
  // The next attempt is re-planned: 4 pairs per rank per step in 4 micro-batches instead of 2 (same global
  // batch).
  f.Register(0);
  f.Register(1);
  v1::AcquireStepRequest req;
  req.set_job_id(f.job);
  req.set_rank(0);
  req.set_step(8);
  v1::AcquireStepResponse resp;
  auto ctx = f.Context();
  ASSERT_TRUE(f.workers->AcquireStep(ctx.get(), req, &resp).ok());
  EXPECT_EQ(resp.micro_batches_size(), 4);
  for (const auto& mb : resp.micro_batches()) EXPECT_EQ(mb.samples_size(), 1);
}

TEST(ServiceTest, CallsWithoutTheTokenAreRefused) {
  Fixture f;
  v1::ListJobsResponse resp;
  auto ctx = f.Context(/*auth=*/false);
  EXPECT_EQ(f.jobs->List(ctx.get(), v1::ListJobsRequest(), &resp).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  v1::HeartbeatRequest hb;
  v1::HeartbeatResponse hr;
  auto ctx2 = f.Context(/*auth=*/false);
  EXPECT_EQ(f.workers->Heartbeat(ctx2.get(), hb, &hr).error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

}  // namespace
}  // namespace zerofit::coordinator

namespace zerofit::coordinator {
namespace {

using service_test::PlannedMicroBatches;

// A spec without micro-batch sizes is sized by the planner at submit time; one that cannot fit is refused
// with the planner's reason.
TEST(ServiceTest, SubmittedJobsWithoutSizesAreSizedByThePlanner) {
  core::RealClock clock;
  auto store = JobStore::Open(":memory:");
  ASSERT_TRUE(store.ok());
  auto c = Coordinator::Create(std::move(*store), &clock);
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string fits = R"(task: reward
model: Mistral-7B
data: /d
world_size: 8
hardware: 8x64GB
training: {global_batch: 64, max_length: 512, bf16: true}
)";
  auto r = (*c)->Submit("a", "", fits, "fits.yaml");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(PlannedMicroBatches(r->job), 1) << "8 pairs per GPU do not fit in one micro-batch at 512 tokens";
  auto logs = (*c)->WaitLogs(r->job.id, 0, absl::ZeroDuration());
  ASSERT_TRUE(logs.ok());
  bool planned = false;
  for (const LogLine& l : *logs)
    planned = planned || l.text.find("sized by the planner for 8x64GB") != std::string::npos;
  EXPECT_TRUE(planned);
  const std::string too_big = R"(task: dpo
model: Llama-2-7B
data: /d
world_size: 1
hardware: 1xrtx4090-24
training: {global_batch: 8, max_length: 1024, bf16: true}
)";
  auto refused = (*c)->Submit("b", "", too_big, "big.yaml");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("nothing fits"), std::string::npos) << refused.status();
  // Offload at stage 0, which the plan search never tries: its empty search crashed the coordinator (SIGSEGV
  // in planner::MakePlan). Refused at the field, and the coordinator serves the next submit.
  const std::string stage0 = R"(task: reward
model: Mistral-7B
data: /d
world_size: 8
training: {global_batch: 64, zero_stage: 0, offload: true}
)";
  refused = (*c)->Submit("b0", "", stage0, "stage0.yaml");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("stage0.yaml:5: field 'training.offload'"), std::string::npos)
      << refused.status();
  // A spec that gives its sizes keeps them.
  const std::string pinned = R"(task: reward
model: Mistral-7B
data: /d
world_size: 8
training: {global_batch: 64, micro_batch: 1, gradient_accumulation: 8}
)";
  auto p = (*c)->Submit("c", "", pinned, "pinned.yaml");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(PlannedMicroBatches(p->job), 8);
  // A micro-batch given alone is honoured (issue 31): 64 pairs / (2 a rank x 8 ranks) = 4 micro-batches,
  // where the planner, not told it, chose its own (more than 1 at micro-batch 1, as the first job above
  // shows).
  const std::string micro_only = R"(task: reward
model: Mistral-7B
data: /d
world_size: 8
hardware: 8x64GB
training: {global_batch: 64, micro_batch: 1, max_length: 512, bf16: true}
)";
  auto m = (*c)->Submit("d", "", micro_only, "micro.yaml");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(PlannedMicroBatches(m->job), 8);
  // ... also where the planner cannot read the model (no config.json): the same 8, not 1.
  const std::string unsized = R"(task: reward
model: /nonexistent/model
data: /d
world_size: 8
training: {global_batch: 64, micro_batch: 1}
)";
  auto u = (*c)->Submit("e", "", unsized, "unsized.yaml");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(PlannedMicroBatches(u->job), 8);
}

TEST(ServiceTest, APreemptionStopsEveryRankAtOneStepAndResumesWithoutARestart) {
  Fixture f;
  f.Register(0);
  f.Register(1);
  auto acquire = [&](int rank, int64_t step) { return f.Acquire(rank, step); };
  for (int64_t step = 0; step < 5; ++step) EXPECT_FALSE(acquire(0, step).stop());
  for (int64_t step = 0; step < 4; ++step) EXPECT_FALSE(acquire(1, step).stop());
  f.Report(0, 3, 3, false);  // checkpoint at step 3
  // Rank 0 has step 4, rank 1 is one behind: both must run step 4 and stop at 5.
  Coordinator& c = f.server->coordinator();
  auto stop = c.Preempt(f.job, "SIGUSR1 from Slurm");
  ASSERT_TRUE(stop.ok()) << stop.status();
  EXPECT_EQ(*stop, 5);
  EXPECT_EQ(*c.Preempt(f.job, "again"), 5) << "idempotent";
  EXPECT_FALSE(acquire(1, 4).stop()) << "a step before the stop step still runs";
  EXPECT_TRUE(acquire(0, 5).stop());
  EXPECT_TRUE(acquire(1, 5).stop());
  EXPECT_TRUE(acquire(1, 6).stop());
  // Both ranks checkpoint step 4 and exit with the preemption code: not a failure.
  for (int rank = 0; rank < 2; ++rank) {
    v1::ReportRequest req;
    req.set_job_id(f.job);
    req.set_rank(rank);
    req.set_step(-1);
    req.set_checkpoint_step(rank == 0 ? 4 : -1);
    req.set_finished(true);
    req.set_exit_code(kPreemptedExitCode);
    v1::ReportResponse resp;
    auto ctx = f.Context();
    ASSERT_TRUE(f.workers->Report(ctx.get(), req, &resp).ok());
  }
  EXPECT_EQ(f.Get().phase(), v1::RUNNING) << "until the launcher exits";
  ASSERT_TRUE(c.LauncherExited(f.job, kPreemptedExitCode).ok());
  v1::Job j = f.Get();
  EXPECT_EQ(j.phase(), v1::RESTARTING);
  EXPECT_EQ(j.restarts(), 0);
  EXPECT_EQ(j.interruptions(), 1);
  EXPECT_EQ(j.checkpoint_step(), 4);
  // The requeued allocation: a new attempt resumes at step 5 and steps are granted again.
  EXPECT_EQ(f.Register(0).resume_step(), 5);
  EXPECT_EQ(f.Register(1).attempt(), 2);
  EXPECT_FALSE(acquire(0, 5).stop());
  ASSERT_TRUE(c.SetSlurmJobId(f.job, "977").ok());
  EXPECT_EQ(f.Get().slurm_job_id(), "977");
  // An allocation that vanished without a word (killed, requeued from outside) is an interruption too.
  ASSERT_TRUE(c.Interrupt(f.job, "the Slurm allocation ended").ok());
  j = f.Get();
  EXPECT_EQ(j.phase(), v1::RESTARTING);
  EXPECT_EQ(j.interruptions(), 2);
  EXPECT_EQ(j.restarts(), 0);
}

TEST(ServiceTest, ACancelledJobAnswersEveryStepWithCancel) {
  Fixture f;
  f.Register(0);
  f.Register(1);
  auto acquire = [&](int rank, int64_t step) { return f.Acquire(rank, step); };
  EXPECT_FALSE(acquire(0, 0).cancel());
  EXPECT_EQ(acquire(0, 0).micro_batches_size(), 2);
  ASSERT_TRUE(f.server->coordinator().Cancel(f.job, "user").ok());
  // No rank trains on after a cancel, even between two heartbeats.
  for (int rank : {0, 1}) {
    const v1::AcquireStepResponse r = acquire(rank, 1);
    EXPECT_TRUE(r.cancel());
    EXPECT_FALSE(r.stop());
    EXPECT_EQ(r.micro_batches_size(), 0);
  }
}

// A rank that cannot start (a missing data dir) reports its error and exits before registering; the
// launch forms no attempt. The job never completed a step, so relaunching the same inputs would fail the
// same way: the job fails at once with the rank's error, max_restarts (2) unused.
TEST(ServiceTest, AJobWhoseWorkersCannotStartFailsAtOnceWithTheirError) {
  Fixture f;
  Coordinator& c = f.server->coordinator();
  f.Register(0);
  v1::ReportRequest req;
  req.set_job_id(f.job);
  req.set_rank(1);
  req.set_host("node2");
  req.set_step(-1);
  req.set_checkpoint_step(-1);
  req.set_finished(true);
  req.set_exit_code(1);
  req.add_log_lines("cannot start: /d/train_ids.jsonl: cannot open");
  v1::ReportResponse resp;
  auto ctx = f.Context();
  ASSERT_TRUE(f.workers->Report(ctx.get(), req, &resp).ok());
  EXPECT_EQ(f.Get().phase(), v1::QUEUED);
  ASSERT_TRUE(c.LauncherExited(f.job, 1).ok());
  const v1::Job j = f.Get();
  EXPECT_EQ(j.phase(), v1::FAILED);
  EXPECT_EQ(j.restarts(), 0);
  EXPECT_NE(j.reason().find("rank 1: cannot start: /d/train_ids.jsonl: cannot open"), std::string::npos)
      << j.reason();
  EXPECT_NE(j.reason().find("the job never completed a step"), std::string::npos) << j.reason();
}

// After an attempt completed steps, a launch that forms no attempt (ranks failing before registering) uses
// one of max_restarts once: it may be transient. The next such launch from the same checkpoint fails the job.
// A normal failed attempt counts once, not again when its launcher exits.
TEST(ServiceTest, LaunchesThatFormNoAttemptAfterProgressAreRetriedOnce) {
  Fixture f;
  Coordinator& c = f.server->coordinator();
  f.Register(0);
  f.Register(1);
  f.Report(0, 0, -1, false);  // step 0 completed
  f.Report(0, -1, -1, true);  // exit code 0 from rank 0, then rank 1 fails
  v1::ReportRequest req;
  req.set_job_id(f.job);
  req.set_rank(1);
  req.set_step(-1);
  req.set_checkpoint_step(-1);
  req.set_finished(true);
  req.set_exit_code(1);
  v1::ReportResponse resp;
  auto ctx = f.Context();
  ASSERT_TRUE(f.workers->Report(ctx.get(), req, &resp).ok());
  EXPECT_EQ(f.Get().restarts(), 1);
  ASSERT_TRUE(c.LauncherExited(f.job, 1).ok());
  EXPECT_EQ(f.Get().restarts(), 1) << "the launcher's exit ends the same attempt";
  EXPECT_EQ(f.Get().phase(), v1::RESTARTING);
  ASSERT_TRUE(c.LauncherExited(f.job, 1).ok());  // the next launch: no rank registered
  EXPECT_EQ(f.Get().restarts(), 2);
  EXPECT_EQ(f.Get().phase(), v1::RESTARTING);
  ASSERT_TRUE(c.LauncherExited(f.job, 1).ok());
  const v1::Job j = f.Get();
  EXPECT_EQ(j.phase(), v1::FAILED);
  EXPECT_NE(j.reason().find("before every rank registered"), std::string::npos) << j.reason();
  EXPECT_NE(j.reason().find("the previous attempt also failed before its first step from the start"),
            std::string::npos)
      << j.reason();
}

// A checkpoint.dir that holds the user's own step-* folders (no `latest`) or another job's checkpoints is
// refused at submit, naming the file, line and field, before any worker could rotate them away; a missing
// or empty directory, or one marked with this job's request id (a resubmitted job), is fine.
TEST(ServiceTest, SubmitRefusesANonEmptyCheckpointDirZerofitDoesNotOwn) {
  Fixture f;
  Coordinator& c = f.server->coordinator();
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("zerofit_submit_ckpt_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  auto submit = [&](const std::string& request, const std::string& more = "") {
    return c.Submit(request, "",
                    absl::StrCat(kSpec, "checkpoint: {dir: ", dir.string(), ", every: 5", more, "}\n"),
                    "job.yaml");
  };
  EXPECT_TRUE(submit("req-missing").ok()) << "created by the first save";
  std::filesystem::create_directories(dir);
  EXPECT_TRUE(submit("req-empty").ok());
  std::filesystem::create_directories(dir / "step-1");
  std::ofstream(dir / "step-1" / "notes.txt") << "the user's own";
  auto refused = submit("req-user");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find(absl::StrCat(
                "job.yaml:12: field 'checkpoint.dir': ", dir.string(),
                " is not empty (step-1: 1 entry) and zerofit did not create it (no zerofit-owner.json)")),
            std::string::npos)
      << refused.status();
  ASSERT_TRUE(core::WriteDirOwner(dir.string(), core::DirOwner{"job-000009", "req-owner"}).ok());
  EXPECT_TRUE(submit("req-owner").ok()) << "the job's own directory (resubmitted, requeued)";
  refused = submit("req-other");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find(
                "already holds another job's checkpoints (job job-000009, request req-owner; step-1, "
                "zerofit-owner.json: 2 entries): give this job an empty or new directory, continue from "
                "them with 'checkpoint.resume: true' (zerofit run --resume), or replace them with "
                "'checkpoint.overwrite: true' (zerofit run --overwrite-checkpoints)"),
            std::string::npos)
      << refused.status();
  // checkpoint.overwrite or checkpoint.resume (or zerofit run --resume): another zerofit job's directory is
  // accepted (its rank 0 replaces, or takes over, the marked folders); the submit itself changes nothing.
  EXPECT_TRUE(submit("req-overwrite", ", overwrite: true").ok());
  EXPECT_TRUE(submit("req-resume", ", resume: true").ok());
  auto resumed =
      c.Submit("req-resume-flag", "",
               absl::StrCat(kSpec, "checkpoint: {dir: ", dir.string(), ", every: 5}\n"), "job.yaml",
               /*resume_checkpoint=*/true);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  auto plan = jobspec::JobPlanFromJson(resumed->job.plan, "plan");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->checkpoint.resume) << "the override is in the plan the workers train by";
  EXPECT_EQ(resumed->job.spec.find("resume"), std::string::npos) << "the spec is stored as given";
  const absl::Status both =
      c.Submit("req-both", "",
               absl::StrCat(kSpec, "checkpoint: {dir: ", dir.string(), ", overwrite: true}\n"), "job.yaml",
               /*resume_checkpoint=*/true)
          .status();
  EXPECT_NE(both.message().find("job.yaml:12: field 'checkpoint.overwrite': true, and it would remove the "
                                "checkpoint --resume continues from"),
            std::string::npos)
      << both;
  EXPECT_TRUE(std::filesystem::exists(dir / "step-1" / "notes.txt"));
  // A name from zerofit submit --name is held to the spec's rule (it reaches `zerofit list` and log lines).
  const absl::Status named =
      c.Submit("req-named", "rm\x1b[2J", absl::StrCat(kSpec, "\n"), "job.yaml").status();
  EXPECT_EQ(named.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(named.message().find("the job's name (zerofit submit --name): 'rm\\x1b[2J' contains a control "
                                 "character"),
            std::string::npos)
      << named;
  // A FIFO where the marker should be is not opened for reading (it would block): refused, promptly.
  std::filesystem::remove(dir / "zerofit-owner.json");
  ASSERT_EQ(::mkfifo((dir / "zerofit-owner.json").c_str(), 0600), 0);
  EXPECT_EQ(submit("req-owner").status().code(), absl::StatusCode::kFailedPrecondition);
  // ... and overwrite never reaches a directory zerofit did not create.
  std::filesystem::remove(dir / "zerofit-owner.json");
  EXPECT_EQ(submit("req-overwrite-2", ", overwrite: true").status().code(),
            absl::StatusCode::kFailedPrecondition);
  std::filesystem::remove_all(dir);
}

TEST(ServiceTest, LauncherEventsOverTheWire) {
  Fixture f;
  f.Register(0);
  f.Register(1);
  auto event = [&](auto set) {
    v1::LauncherEventRequest req;
    req.set_job_id(f.job);
    set(req);
    v1::LauncherEventResponse resp;
    auto ctx = f.Context();
    const grpc::Status s = f.jobs->Launcher(ctx.get(), req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp;
  };
  EXPECT_EQ(event([](v1::LauncherEventRequest& r) { r.set_slurm_job_id("31337"); }).job().slurm_job_id(),
            "31337");
  EXPECT_EQ(event([](v1::LauncherEventRequest& r) { r.set_preempt("SIGUSR1"); }).stop_step(), 0)
      << "no step handed out yet: the ranks stop before step 0";
  v1::Job j = event([](v1::LauncherEventRequest& r) { r.set_exited(kPreemptedExitCode); }).job();
  EXPECT_EQ(j.phase(), v1::RESTARTING);
  EXPECT_EQ(j.interruptions(), 1);
  EXPECT_EQ(j.restarts(), 0);
  f.Register(0);
  f.Register(1);
  j = event([](v1::LauncherEventRequest& r) { r.set_interrupted("allocation gone"); }).job();
  EXPECT_EQ(j.interruptions(), 2);
  EXPECT_EQ(j.reason(), "allocation gone");
  // Without an event, or without the token: refused.
  v1::LauncherEventRequest empty;
  empty.set_job_id(f.job);
  v1::LauncherEventResponse resp;
  auto ctx = f.Context();
  EXPECT_EQ(f.jobs->Launcher(ctx.get(), empty, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  auto anonymous = f.Context(false);
  EXPECT_EQ(f.jobs->Launcher(anonymous.get(), empty, &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

TEST(ServiceTest, RanksShareRankZerosBootstrapIdThroughTheCoordinator) {
  Fixture f;
  constexpr int kWorld = 4;
  // 128 opaque bytes like an ncclUniqueId, zeros included.
  std::string id(128, '\0');
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<char>((i * 37) % 256);
  std::vector<std::string> got(kWorld);
  std::vector<absl::Status> status(kWorld);
  std::vector<std::thread> ranks;
  for (int rank = kWorld - 1; rank >= 0; --rank) {  // the waiters start first
    ranks.emplace_back([&, rank] {
      if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
      client::KvRendezvous kv(
          client::CoordinatorClient(ConnectionTo(f.server->address(), "secret-token-0123456789abcdef0123")),
          f.job);
      auto v = comm::ShareFromRankZero(
          kv, rank, "nccl-id/attempt-1", [&]() -> absl::StatusOr<std::string> { return id; },
          absl::Seconds(10));
      status[rank] = v.status();
      if (v.ok()) got[rank] = *v;
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int rank = 0; rank < kWorld; ++rank) {
    EXPECT_TRUE(status[rank].ok()) << rank << ": " << status[rank];
    EXPECT_EQ(got[rank], id) << "rank " << rank;
  }
  // A key nobody publishes: a deadline, not a hang; a wrong token: refused.
  client::KvRendezvous kv(
      client::CoordinatorClient(ConnectionTo(f.server->address(), "secret-token-0123456789abcdef0123")),
      f.job);
  auto missing = comm::ShareFromRankZero(
      kv, 1, "nccl-id/attempt-2", [] { return absl::StatusOr<std::string>("x"); }, absl::Milliseconds(200));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kDeadlineExceeded) << missing.status();
  client::KvRendezvous stranger(
      client::CoordinatorClient(ConnectionTo(f.server->address(), "wrong-token-0123456789abcdef012345")),
      f.job);
  EXPECT_EQ(stranger.Put("k", "v").code(), absl::StatusCode::kUnauthenticated);
}

TEST(ServiceTest, AnOutOfMemoryReplanSurvivesACoordinatorRestart) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("zerofit_replan_" + std::to_string(::getpid()) + ".db"))
          .string();
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  core::RealClock clock;
  const std::vector<int64_t> lengths(40, 10);
  std::string id;
  {
    auto store = JobStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    auto c = Coordinator::Create(std::move(*store), &clock);
    ASSERT_TRUE(c.ok()) << c.status();
    auto submitted = (*c)->Submit("replan", "", kSpec, "spec.yaml");
    ASSERT_TRUE(submitted.ok()) << submitted.status();
    id = submitted->job.id;
    ASSERT_TRUE((*c)->Register(id, 0, 2, "h", lengths).ok());
    ASSERT_TRUE((*c)->Register(id, 1, 2, "h", {}).ok());
    WorkerReport oom;
    oom.rank = 1;
    oom.out_of_memory = true;
    ASSERT_TRUE((*c)->Report(id, oom).ok());
    ASSERT_TRUE((*c)->Register(id, 0, 2, "h", lengths).ok());
    ASSERT_TRUE((*c)->Register(id, 1, 2, "h", {}).ok());
    EXPECT_EQ(PlannedMicroBatches(*(*c)->Get(id)), 4) << "2 micro-batches per rank doubled";
  }
  auto store = JobStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  // Each attempt's resolved plan is stored: the submit's (0), attempt 1's, and attempt 2's re-plan.
  auto plans = (*store)->Plans(id);
  ASSERT_TRUE(plans.ok()) << plans.status();
  ASSERT_EQ(plans->size(), 3u);
  const int want_micro[] = {2, 2, 4};
  for (int a = 0; a < 3; ++a) {
    EXPECT_EQ((*plans)[a].first, a);
    auto plan = jobspec::JobPlanFromJson((*plans)[a].second, "stored");
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->gradient_accumulation, want_micro[a]) << "attempt " << a;
    if (a == 2) {
      EXPECT_EQ(plan->sizing.rfind("re-planned after out-of-memory: 2 -> 4", 0), 0u) << plan->sizing;
    }
  }
  EXPECT_EQ((*store)->Get(id)->plan, (*plans)[2].second) << "the job's plan is its latest attempt's";
  auto c = Coordinator::Create(std::move(*store), &clock);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(PlannedMicroBatches(*(*c)->Get(id)), 4) << "the re-plan is kept across the restart";
  auto grant = (*c)->AcquireStep(id, 9);
  ASSERT_TRUE(grant.ok()) << grant.status();
  ASSERT_FALSE(grant->stop);
  EXPECT_EQ(grant->assignment->ranks[0].size(), 4u);
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
}

// A job stored by a build that kept no plans is resolved when the coordinator starts, and the plan stored:
// the store holds the one copy every read returns.
TEST(ServiceTest, AJobStoredWithoutAPlanIsResolvedAndStoredAtStart) {
  core::RealClock clock;
  auto store = JobStore::Open(":memory:");
  ASSERT_TRUE(store.ok()) << store.status();
  auto old = (*store)->Submit("old", "svc", kSpec, absl::Now());  // no plan, as an older build wrote it
  ASSERT_TRUE(old.ok()) << old.status();
  ASSERT_TRUE(old->job.plan.empty());
  auto c = Coordinator::Create(std::move(*store), &clock);
  ASSERT_TRUE(c.ok()) << c.status();
  auto job = (*c)->Get(old->job.id);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(PlannedMicroBatches(*job), 2) << job->plan;
}

// Without GRPC_ARG_ALLOW_REUSEPORT = 0 the second server starts too and clients land on either at random.
TEST(ServiceTest, ASecondServerOnABusyPortFailsWithAddressInUse) {
  Fixture first;
  ServerOptions o;
  o.listen = first.server->address();
  o.db_path = ":memory:";
  o.token = "secret-token-0123456789abcdef0123";
  auto second = CoordinatorServer::Start(o, &first.clock);
  ASSERT_FALSE(second.ok()) << "a second coordinator listens on " << o.listen;
  EXPECT_NE(second.status().message().find(absl::StrCat("address in use: ", o.listen)), std::string::npos)
      << second.status();
  EXPECT_NE(second.status().message().find("zerofit status --coordinator"), std::string::npos)
      << second.status();
}

// A follow stream cut by a coordinator shutdown is not a finished job: UNAVAILABLE, so the client follows
// again once the coordinator is back.
TEST(ServiceTest, FollowStreamsEndUnavailableWhenTheCoordinatorShutsDown) {
  Fixture f;
  auto ctx = f.Context();
  v1::StreamLogsRequest req;
  req.set_job_id(f.job);
  req.set_follow(true);
  auto reader = f.jobs->StreamLogs(ctx.get(), req);
  v1::LogLine line;
  ASSERT_TRUE(reader->Read(&line));  // "submitted: ..."
  std::thread stop([&] { f.server->Shutdown(); });
  while (reader->Read(&line)) {
  }
  const grpc::Status s = reader->Finish();
  stop.join();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
}

}  // namespace
}  // namespace zerofit::coordinator
