#include "coordinator/coordinator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/attempt_plan.h"
#include "coordinator/checkpoint_dir_check.h"
#include "core/excerpt.h"
#include "core/status_macros.h"
#include "jobspec/canonical_job_spec.h"
#include "jobspec/job_plan.h"
#include "jobspec/job_spec.h"
#include "jobspec/resolve.h"

namespace zerofit::coordinator {
namespace {

// A spec's name as it reaches error messages (a path, usually).
constexpr size_t kSourceExcerptBytes = 256;

// OK when a submit that reuses `existing`'s request id asks for the same job (AIP-155): the same name and
// the same spec up to formatting. Otherwise AlreadyExists naming the job, rather than the new spec dropped
// without a word.
absl::Status SameRequest(const JobRecord& existing, const std::string& request_id, const std::string& name,
                         const std::string& spec_text) {
  const bool same_spec = jobspec::CanonicalJobSpec(existing.spec) == jobspec::CanonicalJobSpec(spec_text);
  if (same_spec && existing.name == name) return absl::OkStatus();
  return absl::AlreadyExistsError(absl::StrCat(
      "request id '", core::Excerpt(request_id), "' already submitted ", existing.id, " with a different ",
      same_spec ? absl::StrCat("name ('", core::Excerpt(existing.name), "')") : std::string("spec"),
      "; a request id names one request: submit with another request id (or none) for a new job, or with ",
      existing.id, "'s spec for ", existing.id, " itself"));
}

// The job's limits: its spec's max_restarts and watchdog, the server's heartbeat timeout.
JobPolicy PolicyFor(const JobPolicy& server, const jobspec::JobSpec& spec) {
  JobPolicy p = server;
  p.max_restarts = spec.max_restarts;
  p.watchdog.enabled = spec.watchdog.enabled;
  p.watchdog.step_time_factor = spec.watchdog.step_time_factor;
  p.watchdog.floor = absl::Seconds(spec.watchdog.floor_s);
  return p;
}

// At most `bytes` of `text`, cut at a UTF-8 character boundary (proto3 strings must stay valid UTF-8).
std::string Truncated(const std::string& text, size_t bytes) {
  if (text.size() <= bytes) return text;
  while (bytes > 0 && (static_cast<unsigned char>(text[bytes]) & 0xC0) == 0x80) --bytes;
  return text.substr(0, bytes);
}

// An attempt `attempt` (> 0) of a job whose status is `s` has ended: a later one runs or forms, or it failed.
bool AttemptEnded(const JobStatus& s, int attempt) {
  if (attempt <= 0) return false;  // an older worker, or one not registered yet: unknown
  if (s.phase == JobPhase::kRunning) return attempt < s.attempt;
  return attempt <= s.attempt;
}

}  // namespace

absl::Status Coordinator::ResetScheduler(Live& live) {
  live.recent_steps.clear();
  if (live.lengths.empty()) {
    live.scheduler.reset();
    return absl::OkStatus();
  }
  jobspec::SchedulerOptions o;
  o.global_batch = live.plan.global_batch;
  o.world_size = live.plan.world_size;
  o.gradient_accumulation = live.plan.gradient_accumulation;
  o.seed = static_cast<uint64_t>(live.plan.seed);
  ZF_ASSIGN_OR_RETURN(jobspec::StepScheduler sched, jobspec::StepScheduler::Create(live.lengths, o));
  live.scheduler.emplace(std::move(sched));
  return absl::OkStatus();
}

Coordinator::Live Coordinator::MakeLive(const jobspec::JobSpec& spec, std::unique_ptr<JobStateMachine> state,
                                        jobspec::JobPlan plan, planner::Hardware hw) {
  Live live;
  live.state = std::move(state);
  live.spec = spec;
  live.plan = std::move(plan);
  live.hw = std::move(hw);
  return live;
}

absl::StatusOr<jobspec::JobPlan> Coordinator::StoredPlan(JobStore& store, const JobRecord& j,
                                                         const jobspec::JobSpec& spec,
                                                         const planner::Hardware& hw) {
  if (!j.plan.empty()) {
    auto stored = jobspec::JobPlanFromJson(j.plan, j.id);
    if (stored.ok()) return stored;
  }
  // Stored by an older build: resolved as it would be at submit, and stored, so the store stays the one copy.
  ZF_ASSIGN_OR_RETURN(jobspec::JobPlan plan, jobspec::Resolve(spec, hw, {}));
  ZF_RETURN_IF_ERROR(store.PutPlan(j.id, j.status.attempt, jobspec::JobPlanToJson(plan)));
  return plan;
}

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Create(std::unique_ptr<JobStore> store,
                                                                 const core::Clock* clock, JobPolicy policy) {
  std::unique_ptr<Coordinator> c(new Coordinator(std::move(store), clock, policy));
  ZF_ASSIGN_OR_RETURN(std::vector<JobRecord> jobs, c->store_->List());
  for (const JobRecord& j : jobs) {
    auto spec = jobspec::ParseJobSpec(j.spec, j.id);
    if (!spec.ok())
      continue;  // accepted once, so it parsed then; a newer parser refusing it keeps it read-only
    auto hw = jobspec::HardwareOf(*spec);
    // The stored plan: an out-of-memory re-plan or a shrunken world outlives the coordinator.
    auto plan = hw.ok() ? StoredPlan(*c->store_, j, *spec, *hw) : hw.status();
    if (!plan.ok()) continue;  // kept read-only, as a spec that no longer parses
    const JobPolicy p = PolicyFor(policy, *spec);
    Live live = MakeLive(*spec, std::make_unique<JobStateMachine>(p, j.status, clock->Now()),
                         *std::move(plan), *std::move(hw));
    live.last_hosts = SplitHosts(j.attempt_hosts);
    // A job that was running keeps being served: its workers reconnect and ask for their next steps.
    ZF_ASSIGN_OR_RETURN(live.lengths, c->store_->SampleLengths(j.id));
    ZF_RETURN_IF_ERROR(ResetScheduler(live));
    c->jobs_.emplace(j.id, std::move(live));
  }
  return c;
}

absl::StatusOr<Coordinator::Live*> Coordinator::FindLocked(const std::string& id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job '", core::Excerpt(id), "'"));
  return &it->second;
}

absl::Status Coordinator::PersistLocked(const std::string& id, Live& live) {
  ZF_RETURN_IF_ERROR(store_->UpdateStatus(id, live.state->status()));
  changed_.notify_all();
  return absl::OkStatus();
}

absl::Status Coordinator::LogLocked(const std::string& id, const std::string& source,
                                    const std::string& text) {
  ZF_RETURN_IF_ERROR(store_->AppendLog(id, source, text, clock_->Now()).status());
  changed_.notify_all();
  return absl::OkStatus();
}

absl::StatusOr<JobStore::SubmitResult> Coordinator::Submit(const std::string& request_id,
                                                           const std::string& name,
                                                           const std::string& spec_text,
                                                           const std::string& spec_source,
                                                           bool resume_checkpoint) {
  // The client names its spec; every error quotes the name, so it is bounded like any value.
  const std::string source =
      spec_source.empty() ? "job spec" : core::Excerpt(spec_source, kSourceExcerptBytes);
  ZF_ASSIGN_OR_RETURN(jobspec::JobSpec spec, jobspec::ParseJobSpec(spec_text, source));
  if (!name.empty()) {
    if (const std::string why = jobspec::JobNameProblem(name); !why.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("the job's name (zerofit submit --name): ", why));
    }
  }
  if (resume_checkpoint) ZF_RETURN_IF_ERROR(jobspec::ResumeFromCheckpointDir(&spec, spec_text, source));
  // Before the job exists: a checkpoint.dir holding what zerofit did not write is refused, not rotated away.
  ZF_RETURN_IF_ERROR(CheckCheckpointDirAtSubmit(spec.checkpoint, request_id, source,
                                                jobspec::FieldLine(spec_text, "checkpoint.dir")));
  // A job that does not fit is refused here, with the planner's reason, rather than failing on the workers.
  ZF_ASSIGN_OR_RETURN(planner::Hardware hw, jobspec::HardwareOf(spec));
  ZF_ASSIGN_OR_RETURN(jobspec::JobPlan plan, jobspec::Resolve(spec, hw, {}));
  std::lock_guard<std::mutex> lock(mu_);
  const std::string job_name = name.empty() ? spec.name : name;
  ZF_ASSIGN_OR_RETURN(JobStore::SubmitResult r, store_->Submit(request_id, job_name, spec_text, clock_->Now(),
                                                               jobspec::JobPlanToJson(plan)));
  if (!r.created) ZF_RETURN_IF_ERROR(SameRequest(r.job, request_id, job_name, spec_text));
  if (r.created) {
    const JobPolicy p = PolicyFor(policy_, spec);
    const std::string sizing = plan.sizing;
    jobs_.emplace(r.job.id,
                  MakeLive(spec, std::make_unique<JobStateMachine>(p, clock_->Now()), std::move(plan), hw));
    ZF_RETURN_IF_ERROR(LogLocked(r.job.id, "coordinator",
                                 absl::StrCat("submitted: task ", spec.task, ", ", spec.world_size,
                                              " ranks, ", spec.training.steps, " steps")));
    if (!sizing.empty()) ZF_RETURN_IF_ERROR(LogLocked(r.job.id, "coordinator", sizing));
  }
  ZF_ASSIGN_OR_RETURN(r.job, store_->Get(r.job.id));
  return r;
}

std::string Coordinator::PlanFor(const Live& live, int world_size) {
  return jobspec::JobPlanToJson(jobspec::Reshape(live.plan, live.hw, world_size));
}

absl::StatusOr<JobRecord> Coordinator::Get(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  return store_->Get(id);
}

absl::StatusOr<std::vector<JobRecord>> Coordinator::List() {
  std::lock_guard<std::mutex> lock(mu_);
  return store_->List();
}

absl::StatusOr<std::vector<MetricRow>> Coordinator::Metrics(const std::string& id, int64_t after_step) {
  return store_->Metrics(id, after_step);
}

int64_t Coordinator::CommonStopStep(const Live& live) {
  return std::max(live.max_acquired, live.state->status().checkpoint_step) + 1;
}

absl::StatusOr<JobRecord> Coordinator::Cancel(const std::string& id, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  ZF_ASSIGN_OR_RETURN(Live * live, FindLocked(id));
  const bool running = live->state->status().phase == JobPhase::kRunning;
  ZF_RETURN_IF_ERROR(live->state->Cancel(reason.empty() ? "cancelled by the user" : reason, clock_->Now()));
  if (running) live->cancel_at = CommonStopStep(*live);
  ZF_RETURN_IF_ERROR(PersistLocked(id, *live));
  ZF_RETURN_IF_ERROR(LogLocked(
      id, "coordinator",
      absl::StrCat("cancelled: ", live->state->status().reason,
                   running ? absl::StrCat("; ranks stop before step ", *live->cancel_at) : std::string())));
  return store_->Get(id);
}

absl::StatusOr<std::vector<LogLine>> Coordinator::WaitLogs(const std::string& id, int64_t after,
                                                           absl::Duration wait) {
  std::unique_lock<std::mutex> lock(mu_);
  ZF_ASSIGN_OR_RETURN(Live * live, FindLocked(id));
  const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(wait);
  while (true) {
    ZF_ASSIGN_OR_RETURN(std::vector<LogLine> lines, store_->Logs(id, after));
    if (!lines.empty() || IsTerminal(live->state->status().phase) || shutdown_) return lines;
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) return lines;
  }
}

absl::StatusOr<JobRecord> Coordinator::WaitStatus(const std::string& id, const JobStatus& known,
                                                  absl::Duration wait) {
  std::unique_lock<std::mutex> lock(mu_);
  ZF_ASSIGN_OR_RETURN(Live * live, FindLocked(id));
  const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(wait);
  auto differs = [&] {
    const JobStatus& s = live->state->status();
    return s.phase != known.phase || s.attempt != known.attempt || s.checkpoint_step != known.checkpoint_step;
  };
  while (!differs() && !shutdown_) {
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) break;
  }
  return store_->Get(id);
}

absl::Status Coordinator::CheckWorld(const std::string& id, const Live& live, int rank, int world_size) {
  const std::vector<int> allowed = jobspec::AllowedWorldSizes(live.spec);
  if (rank < 0 || rank >= world_size ||
      std::find(allowed.begin(), allowed.end(), world_size) == allowed.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", rank, " of ", world_size, " does not fit job ", id, " (world_size ", live.spec.world_size,
        allowed.size() > 1
            ? absl::StrCat("; slurm.on_node_loss: shrink allows ", absl::StrJoin(allowed, ", "))
            : "",
        ")"));
  }
  const JobStatus& s = live.state->status();
  if (s.phase == JobPhase::kRunning && world_size != s.world_size) {
    return absl::FailedPreconditionError(absl::StrCat("rank ", rank, " of ", world_size, ": attempt ",
                                                      s.attempt, " of job ", id, " runs on ", s.world_size,
                                                      " ranks"));
  }
  return absl::OkStatus();
}

absl::StatusOr<WorkerRegistration> Coordinator::Register(const std::string& job_id, int rank, int world_size,
                                                         const std::string& host,
                                                         const std::vector<int64_t>& lengths) {
  std::lock_guard<std::mutex> lock(mu_);
  ZF_ASSIGN_OR_RETURN(Live * live, FindLocked(job_id));
  const JobStatus& s = live->state->status();
  if (IsTerminal(s.phase)) {
    return absl::FailedPreconditionError(absl::StrCat("job ", job_id, " is ", JobPhaseName(s.phase)));
  }
  ZF_RETURN_IF_ERROR(CheckWorld(job_id, *live, rank, world_size));
  // A full set from an earlier attempt starts over, and so does a partial one of a launch at another world
  // size (a later launch replaces it); a running attempt (workers reconnecting to a restarted coordinator)
  // goes on.
  if (s.phase != JobPhase::kRunning && (live->registered.size() == static_cast<size_t>(live->forming_world) ||
                                        world_size != live->forming_world)) {
    live->registered.clear();
    live->forming_hosts.clear();
    live->forming_world = world_size;
  }
  live->registered.insert(rank);
  live->forming_hosts[rank] = host;
  ZF_RETURN_IF_ERROR(live->state->NoteHost(rank, host));
  if (rank == 0 && !lengths.empty()) {
    ZF_RETURN_IF_ERROR(store_->PutSampleLengths(job_id, lengths));
    live->lengths = lengths;
    ZF_RETURN_IF_ERROR(ResetScheduler(*live));
  }
  ZF_RETURN_IF_ERROR(LogLocked(job_id, absl::StrCat(host, ":", rank), "registered"));
  if (s.phase != JobPhase::kRunning && live->registered.size() == static_cast<size_t>(world_size)) {
    ZF_RETURN_IF_ERROR(FormAttemptLocked(job_id, *live, world_size));
  }
  ZF_ASSIGN_OR_RETURN(JobRecord record, store_->Get(job_id));
  const JobStatus& now = live->state->status();
  // Before the attempt starts (ranks still registering) the answer names the attempt about to run (and its
  // plan before an out-of-memory re-plan, which the last registration applies: the step grants carry the
  // micro-batches, the plan's count is for reading).
  return WorkerRegistration{now.phase == JobPhase::kRunning ? now.attempt : now.attempt + 1,
                            now.checkpoint_step + 1, record.spec, record.request_id,
                            PlanFor(*live, world_size)};
}

absl::Status Coordinator::FormAttemptLocked(const std::string& job_id, Live& live, int world_size) {
  const int world_before = live.plan.world_size;
  // Another world size than the last attempt's (a Slurm job that shrank, or grew back): the same global
  // batch, the same pairs per micro-batch, more or fewer micro-batches per rank.
  live.plan = jobspec::Reshape(live.plan, live.hw, world_size);
  if (live.state->status().replan) {
    // Out of memory last time: smaller micro-batches, more of them, same global batch.
    live.plan = jobspec::Replan(live.plan, live.hw, jobspec::OutOfMemory{});
    ZF_RETURN_IF_ERROR(LogLocked(job_id, "coordinator", live.plan.sizing));
  }
  std::vector<std::string> by_rank;
  for (const auto& [rank, host] : live.forming_hosts) by_rank.push_back(host);
  const std::vector<std::string> hosts = DistinctHosts(by_rank);
  std::string nodes;  // "1 node of 2: node2 lost", for an attempt at another size than the spec's
  if (live.spec.slurm && (world_size != live.spec.world_size || world_before != world_size)) {
    nodes = DescribeNodes(world_size / live.spec.slurm->ranks_per_node(), live.spec.slurm->nodes,
                          LostHosts(live.last_hosts, hosts));
  }
  const std::string note =
      world_size == live.spec.world_size
          ? ""
          : absl::StrCat(world_size, " of ", live.spec.world_size, " ranks (", nodes, ")");
  const int attempt = live.state->status().attempt + 1;  // the one Schedule starts
  ZF_RETURN_IF_ERROR(
      store_->SetAttemptPlan(job_id, {attempt, jobspec::JobPlanToJson(live.plan), JoinHosts(hosts), note}));
  live.last_hosts = hosts;
  ZF_RETURN_IF_ERROR(ResetScheduler(live));
  ZF_RETURN_IF_ERROR(live.state->Schedule(world_size, clock_->Now()));
  live.scheduled_in_launch = true;
  live.finished.clear();
  live.max_acquired = live.state->status().checkpoint_step;
  ZF_RETURN_IF_ERROR(PersistLocked(job_id, live));
  const JobStatus& s = live.state->status();
  const int64_t global = live.plan.global_batch;
  return LogLocked(
      job_id, "coordinator",
      absl::StrCat("attempt ", s.attempt, " running on ", world_size, " ranks",
                   nodes.empty() ? "" : absl::StrCat(" (", nodes, ")"), " from step ", s.checkpoint_step + 1,
                   nodes.empty() ? ""
                                 : absl::StrCat(": ", DescribeReplan(global, world_size,
                                                                     live.plan.gradient_accumulation))));
}

absl::StatusOr<HeartbeatAnswer> Coordinator::Heartbeat(const std::string& job_id, const HeartbeatInfo& beat) {
  std::lock_guard<std::mutex> lock(mu_);
  ZF_ASSIGN_OR_RETURN(Live * live, FindLocked(job_id));
  const JobStatus& s = live->state->status();
  // Its attempt is over (it failed, or a later one runs): the rank may be stuck in a collective that never
  // returns, so it is told to abort, not to stop at a step boundary it may never reach.
  if (AttemptEnded(s, beat.attempt) && s.phase != JobPhase::kCancelled && s.phase != JobPhase::kSucceeded) {
    return HeartbeatAnswer{true, true};
  }
  if (s.phase == JobPhase::kQueued || s.phase == JobPhase::kRestarting) return HeartbeatAnswer{};  // forming
  if (s.phase == JobPhase::kCancelled) {
    // A rank still here cancel_grace after the cancel has not reached the stop step (a long step, a peer
    // gone): it may wait in a collective that never completes.
    const bool late = !live->cancel_at || clock_->Now() - s.since >= live->state->policy().cancel_grace;
    return HeartbeatAnswer{true, late};
  }
  if (s.phase != JobPhase::kRunning) return HeartbeatAnswer{true, s.phase == JobPhase::kFailed};
  ZF_RETURN_IF_ERROR(
      live->state->Heartbeat(beat.rank, clock_->Now(), Truncated(beat.activity, kMaxActivityBytes)));
  return HeartbeatAnswer{};
}

absl::StatusOr<StepGrant> Coordinator::AcquireStep(const std::string& job_id, int64_t step, int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  ZF_ASSIGN_OR_RETURN(Live * live, FindLocked(job_id));
  if (!live->scheduler) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, ": rank 0 has not registered the sample lengths yet"));
  }
  if (step < 0) return absl::InvalidArgumentError(absl::StrCat("step ", step, " < 0"));
  const JobPhase phase = live->state->status().phase;
  // A step before a cancel's stop step is one some rank already holds: its peers must run it with that rank.
  const bool before_cancel = phase == JobPhase::kCancelled && live->cancel_at && step < *live->cancel_at;
  if (IsTerminal(phase) && !before_cancel) return StepGrant{nullptr, false, true};
  if (live->stop_at && step >= *live->stop_at) return StepGrant{nullptr, true};
  if (rank >= 0 && phase == JobPhase::kRunning) {
    ZF_RETURN_IF_ERROR(live->state->StepStarted(rank, step, clock_->Now()));
  }
  live->max_acquired = std::max(live->max_acquired, step);
  auto it = live->recent_steps.find(step);
  if (it != live->recent_steps.end()) return StepGrant{it->second, false};
  auto a = std::make_shared<const jobspec::StepAssignment>(live->scheduler->Assign(step));
  live->recent_steps.emplace(step, a);
  if (live->recent_steps.size() > kRecentSteps) live->recent_steps.erase(live->recent_steps.begin());
  return StepGrant{a, false};
}

absl::StatusOr<int64_t> Coordinator::Preempt(const std::string& job_id, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  ZF_ASSIGN_OR_RETURN(Live * live, FindLocked(job_id));
  const JobStatus& s = live->state->status();
  if (IsTerminal(s.phase)) {
    return absl::FailedPreconditionError(absl::StrCat("job ", job_id, " is ", JobPhaseName(s.phase)));
  }
  if (live->stop_at) return *live->stop_at;
  live->stop_at = CommonStopStep(*live);  // every rank stops at this same boundary
  live->stop_reason = why;
  ZF_RETURN_IF_ERROR(LogLocked(job_id, "coordinator",
                               absl::StrCat("preemption (", why, "): ranks checkpoint step ",
                                            *live->stop_at - 1, " and exit with code ", kPreemptedExitCode)));
  return *live->stop_at;
}

absl::Status Coordinator::Interrupt(const std::string& job_id, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  ZF_ASSIGN_OR_RETURN(Live * live, FindLocked(job_id));
  return InterruptLocked(job_id, *live, why);
}

absl::Status Coordinator::InterruptLocked(const std::string& job_id, Live& live, const std::string& why) {
  live.stop_at.reset();
  live.stop_reason.clear();
  const JobPhase before = live.state->status().phase;
  ZF_RETURN_IF_ERROR(live.state->Interrupt(why, clock_->Now()));
  if (live.state->status().phase == before) return absl::OkStatus();
  live.registered.clear();
  ZF_RETURN_IF_ERROR(PersistLocked(job_id, live));
  return LogLocked(job_id, "coordinator",
                   absl::StrCat("interrupted: ", why, "; resumes from checkpoint step ",
                                live.state->status().checkpoint_step));
}

absl::Status Coordinator::SetSlurmJobId(const std::string& job_id, const std::string& slurm_job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  ZF_RETURN_IF_ERROR(FindLocked(job_id).status());
  return store_->SetSlurmJobId(job_id, slurm_job_id);
}

absl::Status Coordinator::Report(const std::string& job_id, const WorkerReport& r) {
  std::lock_guard<std::mutex> lock(mu_);
  ZF_ASSIGN_OR_RETURN(Live * live, FindLocked(job_id));
  const std::string source = absl::StrCat(r.host, ":", r.rank);
  // Before anything of the report takes effect; the refusal is also kept in the job's log, where whoever
  // reads why the attempt failed looks (the rank only sees it in its own stderr).
  if (absl::Status bad = ValidateNamedMetrics(r.named); !bad.ok()) {
    ZF_RETURN_IF_ERROR(
        LogLocked(job_id, "coordinator", absl::StrCat("refused a report of ", source, ": ", bad.message())));
    return bad;
  }
  for (const std::string& line : r.log_lines) ZF_RETURN_IF_ERROR(LogLocked(job_id, source, line));
  // A rank of an attempt that ended (aborted after a hang, or late): its lines are kept, nothing else counts
  // (no metric, no checkpoint, no error for the next attempt's reason).
  if (AttemptEnded(live->state->status(), r.attempt)) return absl::OkStatus();
  if (r.step >= 0) {
    ZF_RETURN_IF_ERROR(store_->AppendMetric(
        job_id,
        MetricRow{r.step, r.rank, r.loss, r.accuracy, r.tokens_per_s, r.peak_bytes, clock_->Now(), r.named}));
  }
  const bool failed = r.finished && r.exit_code != 0 && r.exit_code != kPreemptedExitCode && !r.out_of_memory;
  if (failed && !IsTerminal(live->state->status().phase)) {
    // Also before the attempt formed (a rank that cannot start): the failure's reason names this error.
    ZF_RETURN_IF_ERROR(live->state->NoteWorkerError(r.rank, absl::StrJoin(r.log_lines, "; "), r.after_abort));
  }
  if (live->state->status().phase != JobPhase::kRunning) return absl::OkStatus();  // a late report
  if (r.step >= 0) {
    ZF_RETURN_IF_ERROR(live->state->StepCompleted(r.step));
    if (r.rank >= 0 && r.rank < live->state->status().world_size) {
      ZF_RETURN_IF_ERROR(live->state->RankProgressed(r.rank, clock_->Now()));
      if (r.step + 1 >= live->spec.training.steps) ZF_RETURN_IF_ERROR(live->state->RankFinishing(r.rank));
    }
  }
  bool changed = false;
  if (r.checkpoint_step >= 0 && r.checkpoint_step > live->state->status().checkpoint_step) {
    ZF_RETURN_IF_ERROR(live->state->CheckpointWritten(r.checkpoint_step));
    changed = true;
  }
  if (r.out_of_memory) {
    ZF_RETURN_IF_ERROR(live->state->OutOfMemory(r.rank, "out of memory", clock_->Now()));
    changed = true;
  } else if (r.finished && r.exit_code == kPreemptedExitCode && live->stop_at) {
    // Stopped for the preemption: the launcher's exit ends the attempt as an interruption.
  } else if (failed && r.after_abort) {
    // Failed because a peer failed (its collective was ended): the peer's own report, or the launcher's exit,
    // ends the attempt, with the peer's error as the reason whichever report arrived first.
  } else if (r.finished) {
    ZF_RETURN_IF_ERROR(live->state->WorkerExited(r.rank, r.exit_code, clock_->Now()));
    live->finished.insert(r.rank);
    if (live->state->status().phase == JobPhase::kRunning &&
        live->finished.size() == static_cast<size_t>(live->state->status().world_size)) {
      ZF_RETURN_IF_ERROR(live->state->Succeed(clock_->Now()));
    }
    changed = true;
  }
  if (changed) {
    ZF_RETURN_IF_ERROR(PersistLocked(job_id, *live));
    if (live->state->status().phase != JobPhase::kRunning) {
      ZF_RETURN_IF_ERROR(LogLocked(
          job_id, "coordinator",
          absl::StrCat(JobPhaseName(live->state->status().phase),
                       live->state->status().reason.empty() ? "" : ": ", live->state->status().reason)));
    }
  }
  return absl::OkStatus();
}

absl::Status Coordinator::LauncherExited(const std::string& job_id, int exit_code) {
  std::lock_guard<std::mutex> lock(mu_);
  ZF_ASSIGN_OR_RETURN(Live * live, FindLocked(job_id));
  if (live->stop_at) {
    const std::string why = live->stop_reason;
    return InterruptLocked(job_id, *live,
                           absl::StrCat("preempted (", why, "), launcher exited with code ", exit_code));
  }
  const JobStatus before = live->state->status();
  const bool formed = live->scheduled_in_launch;
  live->scheduled_in_launch = false;
  if (!formed && (before.phase == JobPhase::kQueued || before.phase == JobPhase::kRestarting)) {
    // No attempt formed in this launch (the ranks' own log lines say why): it counts against max_restarts,
    // or the same failing start would be relaunched forever.
    ZF_RETURN_IF_ERROR(live->state->LaunchFailed(exit_code, clock_->Now()));
  } else {
    ZF_RETURN_IF_ERROR(live->state->LauncherExited(exit_code, clock_->Now()));
  }
  if (live->state->status().phase != before.phase || live->state->status().restarts != before.restarts) {
    live->registered.clear();
    ZF_RETURN_IF_ERROR(PersistLocked(job_id, *live));
    ZF_RETURN_IF_ERROR(LogLocked(
        job_id, "coordinator",
        absl::StrCat(JobPhaseName(live->state->status().phase), ": ", live->state->status().reason)));
  }
  return absl::OkStatus();
}

absl::Status Coordinator::KvPut(const std::string& job_id, const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  ZF_RETURN_IF_ERROR(FindLocked(job_id).status());
  kv_[{job_id, key}] = value;
  changed_.notify_all();
  return absl::OkStatus();
}

absl::StatusOr<std::string> Coordinator::KvGet(const std::string& job_id, const std::string& key,
                                               absl::Duration wait) {
  std::unique_lock<std::mutex> lock(mu_);
  ZF_RETURN_IF_ERROR(FindLocked(job_id).status());
  const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(wait);
  while (true) {
    auto it = kv_.find({job_id, key});
    if (it != kv_.end()) return it->second;
    if (shutdown_ || changed_.wait_until(lock, deadline) == std::cv_status::timeout) {
      return absl::DeadlineExceededError(
          absl::StrCat("key '", key, "' of job ", job_id, " not set within ", absl::FormatDuration(wait)));
    }
  }
}

absl::Status Coordinator::Tick() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, live] : jobs_) {
    if (live.state->Tick(clock_->Now())) {
      live.registered.clear();
      ZF_RETURN_IF_ERROR(PersistLocked(id, live));
      ZF_RETURN_IF_ERROR(LogLocked(
          id, "coordinator",
          absl::StrCat(JobPhaseName(live.state->status().phase), ": ", live.state->status().reason)));
    }
  }
  return absl::OkStatus();
}

void Coordinator::Shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  shutdown_ = true;
  changed_.notify_all();
}

}  // namespace zerofit::coordinator
