#include "worker/loop/worker_loop.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/status_macros.h"
#include "jobspec/exit_codes.h"
#include "sharding/checkpoint.h"
#include "sharding/checkpoint_owner.h"
#include "sharding/checkpoint_rotation.h"

namespace zerofit::worker {
namespace {

namespace names = metrics::metric_names;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

double ValueOr(const metrics::StepMetrics& m, const std::string& name, double fallback = 0.0) {
  return m.Get(name).value_or(fallback);
}

// A step's (prefix "") or evaluation's (prefix "eval/") task figures: accuracy and margin of a reward model
// or DPO; an SFT model's perplexity and token accuracy (it has no second response to rank its completion
// against).
std::string TaskFigures(const metrics::StepMetrics& m, const std::string& prefix, bool with_margin) {
  if (auto perplexity = m.Get(prefix + names::kSftPerplexity)) {
    std::string out = absl::StrFormat("ppl %.3f", *perplexity);
    if (auto tokens = m.Get(prefix + names::kSftTokenAccuracy))
      absl::StrAppendFormat(&out, "  tok-acc %.3f", *tokens);
    return out;
  }
  std::string out = absl::StrFormat("acc %.3f", ValueOr(m, prefix + names::kAccuracy));
  if (with_margin) {
    absl::StrAppendFormat(
        &out, "  margin %.3f",
        m.Get(prefix + names::kRewardMargin).value_or(ValueOr(m, prefix + names::kDpoMargin)));
  }
  return out;
}

// A job's last line: its held-out figure (GRPO: over prompts), or that it had no held-out data.
std::string DoneLine(const metrics::StepMetrics& eval) {
  const std::string prefix = names::kEvalPrefix;
  const std::optional<double> prompts = eval.Get(prefix + names::kEvalPrompts);  // GRPO
  const double count = prompts ? *prompts : ValueOr(eval, prefix + names::kEvalPairs);
  if (count <= 0) return "done: no held-out data to evaluate (data.test)";
  if (auto perplexity = eval.Get(prefix + names::kSftPerplexity)) {
    const std::optional<double> tokens = eval.Get(prefix + names::kSftTokenAccuracy);
    return absl::StrFormat("done: held-out perplexity %.3f%s over %.0f examples", *perplexity,
                           tokens ? absl::StrFormat(", token accuracy %.3f", *tokens) : "", count);
  }
  return absl::StrFormat("done: held-out accuracy %.3f over %.0f %s",
                         ValueOr(eval, prefix + names::kAccuracy), count, prompts ? "prompts" : "pairs");
}

// What `zerofit plan`'s memory model predicts for this attempt, printed at its start so that the peaks each
// step measures (the progress line's "device peak") can be read against it.
std::string PlannedPeakLine(const jobspec::PlannedPeak& p) {
  if (p.device_bytes <= 0) return absl::StrCat("planned peak: ", p.basis.empty() ? "no estimate" : p.basis);
  return absl::StrFormat("planned peak: %.2f GiB device per rank, %.2f GiB host per node (%s)",
                         p.device_bytes / kGiB, p.host_bytes / kGiB, p.basis);
}

}  // namespace

bool IsOutOfMemory(const absl::Status& status) {
  const std::string msg(status.message());
  return status.code() == absl::StatusCode::kResourceExhausted ||
         msg.find("out of memory") != std::string::npos ||
         msg.find("can't allocate memory") != std::string::npos;
}

WorkerLoop::WorkerLoop(WorkerLoopOptions options, const client::CoordinatorClient* coordinator,
                       std::string job, comm::Rendezvous* rendezvous)
    : options_(std::move(options)),
      coordinator_(coordinator),
      job_id_(std::move(job)),
      rendezvous_(rendezvous),
      own_activity_(options_.activity ? nullptr : std::make_unique<RankActivity>()),
      activity_(options_.activity ? options_.activity : own_activity_.get()) {}

WorkerLoop::~WorkerLoop() = default;

absl::Status WorkerLoop::Report(const Message& m) {
  // A coordinator the heartbeats already lost is not waited for again (a call retries for its whole budget).
  if (heartbeat_) ZF_RETURN_IF_ERROR(heartbeat_->CoordinatorLost());
  v1::ReportRequest req;
  req.set_job_id(job_id_);
  req.set_rank(options_.rank);
  req.set_attempt(registered_.attempt());
  req.set_host(options_.hostname);
  req.set_step(m.metrics ? m.metrics->step : -1);
  if (m.metrics) {
    // The fixed fields older clients read, from the named values.
    req.set_loss(ValueOr(*m.metrics, names::kLoss));
    req.set_accuracy(ValueOr(*m.metrics, names::kAccuracy));
    req.set_tokens_per_s(ValueOr(*m.metrics, names::kTokensPerS));
    req.set_peak_bytes(static_cast<int64_t>(ValueOr(*m.metrics, names::kHostPeakRssBytes)));
    for (const metrics::NamedValue& v : m.metrics->values) {
      v1::NamedValue* out = req.add_metrics();
      out->set_name(v.name);
      out->set_value(v.value);
    }
  }
  if (!m.line.empty()) req.add_log_lines(m.line);
  req.set_checkpoint_step(m.checkpoint);
  req.set_finished(m.finished);
  req.set_exit_code(m.exit_code);
  req.set_out_of_memory(m.out_of_memory);
  req.set_after_abort(m.after_abort);
  return coordinator_->Report(req);
}

absl::Status WorkerLoop::Fail(const std::string& what, absl::Status error, bool out_of_memory) {
  Message m;
  m.line = absl::StrCat(what, ": ", error.message());
  m.finished = true;
  m.exit_code = 1;
  m.out_of_memory = out_of_memory;
  // Aborted: a collective a peer's failure ended ("another rank failed"), or the coordinator ended the
  // attempt.
  m.after_abort = error.code() == absl::StatusCode::kAborted;
  (void)Report(m);  // best effort: the error itself is what the process exits with
  return error;
}

void WorkerLoop::OnAbort() {
  // The report goes first: once the communicator is aborted the training thread fails and the process may
  // end before a later report would.
  (void)Report({absl::StrCat("aborting: the coordinator ended attempt ", registered_.attempt(),
                             "; this rank was at ", activity_->Describe())});
  if (options_.abort) options_.abort();
}

absl::Status WorkerLoop::CheckNotAborted(const std::string& before) const {
  if (!heartbeat_ || !heartbeat_->abort_requested()) return absl::OkStatus();
  return absl::AbortedError(absl::StrCat("the coordinator ended attempt ", registered_.attempt(),
                                         " (see the job's log): ", before, " aborted"));
}

absl::StatusOr<int> WorkerLoop::Run() {
  ZF_RETURN_IF_ERROR(Start());
  for (int64_t step = first_step_; step < plan_.steps; ++step) {
    std::optional<int> exit_code;
    ZF_RETURN_IF_ERROR(TrainStep(step, &exit_code));
    if (exit_code) return *exit_code;
  }
  return Finish();
}

absl::Status WorkerLoop::Start() {
  ZF_ASSIGN_OR_RETURN(job_, coordinator_->Get(job_id_));
  ZF_ASSIGN_OR_RETURN(plan_, jobspec::JobPlanFromJson(job_.plan(), job_id_));
  // Any world size the job allows (a Slurm job with on_node_loss: shrink resumes on fewer nodes); the
  // attempt's own plan comes with the registration.
  const std::vector<int>& allowed = plan_.world_sizes;
  if (std::find(allowed.begin(), allowed.end(), options_.world_size) == allowed.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", job_id_, " wants world_size ", absl::StrJoin(allowed, " or "),
                     " but the launcher started ", options_.world_size, " ranks"));
  }
  auto session = options_.make_session(plan_, AttemptContext{job_id_, job_.attempt(), rendezvous_});
  if (!session.ok()) return Fail("cannot start", session.status());
  session_ = *std::move(session);

  v1::RegisterWorkerRequest reg;
  reg.set_job_id(job_id_);
  reg.set_rank(options_.rank);
  reg.set_world_size(options_.world_size);
  reg.set_host(options_.hostname);
  if (options_.rank == 0) {  // the scheduler balances these; rank 0 also reports their count
    const std::vector<int64_t> lengths = session_->TrainLengths();
    num_train_pairs_ = static_cast<int64_t>(lengths.size());
    for (int64_t len : lengths) reg.add_sample_lengths(len);
  }
  ZF_ASSIGN_OR_RETURN(registered_, coordinator_->Register(reg));
  if (!registered_.plan().empty()) {  // an older coordinator sends none: Job.plan is the attempt's
    ZF_ASSIGN_OR_RETURN(plan_, jobspec::JobPlanFromJson(registered_.plan(), job_id_));
    if (plan_.world_size != options_.world_size) {
      return absl::InternalError(absl::StrCat("the coordinator registered rank ", options_.rank, " of ",
                                              options_.world_size, " for an attempt of ", plan_.world_size));
    }
  }
  activity_->SetAttempt(registered_.attempt());
  // Every rank registered (and rank 0's lengths arrived) before anyone asks for a step.
  ZF_RETURN_IF_ERROR(options_.barrier(options_.barrier_timeout));
  if (absl::Status resumed = Resume(); !resumed.ok()) {
    const int64_t at = registered_.resume_step();
    return Fail(at > 0 ? absl::StrCat("cannot resume at step ", at) : std::string("cannot start"), resumed);
  }

  // Named metrics: alarms on every rank, the plan's sinks (metrics: {tensorboard, jsonl}) on rank 0.
  metrics::RecorderOptions ro;
  if (options_.rank == 0) {
    ro.tensorboard_dir = plan_.metrics.tensorboard;
    ro.jsonl_path = plan_.metrics.jsonl;
  }
  ro.hostname = options_.hostname;
  ro.now_unix_s = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  ro.alarms.reward_model = plan_.task == "reward";
  ro.alarms.rank = options_.rank;
  auto recorder = metrics::MetricsRecorder::Create(ro);
  if (!recorder.ok()) return Fail("cannot open the metrics sinks", recorder.status());
  recorder_ = *std::move(recorder);
  HeartbeaterOptions ho;
  ho.rank = options_.rank;
  ho.period = options_.heartbeat_period;
  ho.silence_limit = options_.coordinator_silence_limit;
  ho.abort_grace = options_.abort_grace;
  ho.activity = activity_;
  ho.on_abort = [this] { OnAbort(); };
  ho.on_grace_expired = options_.exit_after_abort;
  heartbeat_ = std::make_unique<Heartbeater>(coordinator_, job_id_, std::move(ho));
  step_time_.emplace(absl::Now());
  return ReportOpening();
}

absl::Status WorkerLoop::Resume() {
  first_step_ = registered_.resume_step();
  saved_ = first_step_ - 1;
  const std::string& dir = plan_.checkpoint.dir;
  if (first_step_ == 0) {
    return plan_.checkpoint.resume ? ContinueFromLatestCheckpoint() : CheckFreshCheckpointDir();
  }
  if (dir.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("the coordinator resumes job ", job_id_, " at step ",
                                                      first_step_, " but its plan has no checkpoint.dir"));
  }
  ZF_ASSIGN_OR_RETURN(const int64_t applied, session_->LoadCheckpoint(dir));
  if (applied != first_step_) {
    return absl::DataLossError(absl::StrCat(dir, ": the checkpoint holds ", applied,
                                            " steps, the coordinator resumes at step ", first_step_));
  }
  return absl::OkStatus();
}

absl::Status WorkerLoop::CheckFreshCheckpointDir() {
  // Starting over: the first save would replace whatever checkpoint.dir holds, so it must be ours (an
  // attempt of this job that died before its checkpoint was recorded) or nothing; with checkpoint.overwrite,
  // rank 0 first removes what earlier zerofit jobs left there (the other ranks leave the directory to it).
  const std::string& dir = plan_.checkpoint.dir;
  if (dir.empty() || (plan_.checkpoint.overwrite && options_.rank != 0)) return absl::OkStatus();
  if (plan_.checkpoint.overwrite) {
    ZF_ASSIGN_OR_RETURN(retired_, sharding::RetireOtherJobsCheckpoints(
                                      dir, core::DirOwner{job_id_, registered_.request_id()}));
  }
  return sharding::CheckCheckpointDirIsOurs(dir, registered_.request_id());
}

absl::Status WorkerLoop::ContinueFromLatestCheckpoint() {
  const std::string& dir = plan_.checkpoint.dir;
  // Rank 0 takes the earlier job's folders over once the job is known to continue from them (a refused
  // checkpoint stays that job's), before its first step: no rank saves before then.
  const auto take_over = [&] {
    if (options_.rank != 0) return absl::OkStatus();
    return sharding::AdoptCheckpoints(dir, core::DirOwner{job_id_, registered_.request_id()}).status();
  };
  const auto latest = sharding::ReadLatestCheckpoint(dir);
  if (absl::IsNotFound(latest.status())) {
    continued_ = absl::StrCat("checkpoint.resume: no checkpoint in ", dir, " yet; starting from step 0");
    return take_over();
  }
  ZF_RETURN_IF_ERROR(latest.status());
  // Collective, and it checks the parameters' names and sizes against this job's model.
  const absl::StatusOr<int64_t> loaded = session_->LoadCheckpoint(dir);
  if (!loaded.ok()) {
    return absl::Status(loaded.status().code(),
                        absl::StrCat("checkpoint.resume: ", loaded.status().message()));
  }
  const int64_t applied = *loaded;
  const std::string written_by = core::DirOwnerFromJson(latest->extra).Describe();
  const std::string what =
      absl::StrCat(latest->dir, written_by.empty() ? "" : absl::StrCat(" (", written_by, ")"));
  if (applied >= plan_.steps) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint.resume: ", what, " holds ", applied, " steps and training.steps is ",
                     plan_.steps, ": nothing is left to train; raise training.steps to train on from it"));
  }
  first_step_ = applied;
  saved_ = applied - 1;
  continued_ = absl::StrCat("checkpoint.resume: continuing from ", what, " after ", applied, " steps");
  return take_over();
}

absl::Status WorkerLoop::ReportOpening() {
  ZF_RETURN_IF_ERROR(Report({absl::StrCat("started: ", options_.launched_as)}));
  if (options_.rank != 0) return absl::OkStatus();
  const char* items = plan_.task == "grpo"  ? " training prompts"
                      : plan_.task == "sft" ? " training examples"
                                            : " training pairs";
  ZF_RETURN_IF_ERROR(Report({absl::StrCat("attempt ", registered_.attempt(), ": ", num_train_pairs_, items,
                                          ", steps ", first_step_, "..", plan_.steps - 1)}));
  ZF_RETURN_IF_ERROR(Report({PlannedPeakLine(plan_.planned_peak)}));
  if (!continued_.empty()) ZF_RETURN_IF_ERROR(Report({continued_}));
  // The data report once per job, not on every resume (a job continuing from another's checkpoint has it).
  if (registered_.resume_step() > 0) return absl::OkStatus();
  if (!retired_.empty()) {
    ZF_RETURN_IF_ERROR(Report({absl::StrCat("checkpoint.overwrite: removed an earlier job's checkpoints: ",
                                            absl::StrJoin(retired_, ", "))}));
  }
  for (absl::string_view line : absl::StrSplit(session_->DataReportText(), '\n', absl::SkipEmpty())) {
    ZF_RETURN_IF_ERROR(Report({absl::StrCat("data: ", line)}));
  }
  return absl::OkStatus();
}

absl::Status WorkerLoop::TrainStep(int64_t step, std::optional<int>* exit_code) {
  ZF_RETURN_IF_ERROR(heartbeat_->CoordinatorLost());
  ZF_RETURN_IF_ERROR(CheckNotAborted(absl::StrCat("step ", step)));
  ZF_ASSIGN_OR_RETURN(const v1::AcquireStepResponse grant,
                      coordinator_->AcquireStep(job_id_, options_.rank, step));
  // Only the grant says where a cancelled job stops, never this rank's own heartbeat: the coordinator picks
  // one step for every rank, and a rank that left before a step its peers already hold would leave them
  // waiting in that step's collectives.
  if (grant.cancel()) {
    ZF_RETURN_IF_ERROR(Report(
        {absl::StrCat("stopping before step ", step, ": the job was cancelled"), nullptr, -1, true, 0}));
    *exit_code = 0;
    return absl::OkStatus();
  }
  if (grant.stop()) {
    ZF_ASSIGN_OR_RETURN(*exit_code, Preempted(step));
    return absl::OkStatus();
  }
  MicroBatches micro;
  for (const auto& mb : grant.micro_batches()) micro.emplace_back(mb.samples().begin(), mb.samples().end());
  activity_->EnterStep(step);
  auto stepped = session_->Step(step, micro);
  if (!stepped.ok()) {
    // Out of memory: the coordinator re-plans the next attempt with smaller micro-batches.
    return Fail(absl::StrCat("step ", step, " failed"), stepped.status(), IsOutOfMemory(stepped.status()));
  }
  metrics::StepMetrics m = *std::move(stepped);
  if (jobspec::EvalDue(plan_.steps, plan_.eval.every, step)) {
    activity_->SetPhase("evaluation");
    auto eval = session_->Evaluate();
    if (!eval.ok()) return Fail(absl::StrCat("evaluation after step ", step, " failed"), eval.status());
    for (const metrics::NamedValue& v : *eval) m.Set(v.name, v.value);
    last_eval_ = *std::move(eval);
  }
  auto alarms = recorder_->Record(m);
  if (!alarms.ok()) {  // training cannot be right (a NaN loss): stop, saying where
    (void)Report({std::string(alarms.status().message()), &m, -1, true, 1});
    return alarms.status();
  }
  for (const std::string& warning : *alarms) {
    if (options_.rank == 0) ZF_RETURN_IF_ERROR(Report({warning}));
  }
  int64_t checkpoint = -1;
  const bool last = step + 1 == plan_.steps;
  if (!plan_.checkpoint.dir.empty() && ((step + 1) % plan_.checkpoint.every == 0 || last)) {
    ZF_RETURN_IF_ERROR(Checkpoint(step));
    checkpoint = step;
  }
  // Every rank reports its step metrics (with its own time split and peaks); rank 0 also the progress line
  // and the checkpoint.
  activity_->SetPhase("report");
  step_time_->StepEnded(absl::Now());
  const bool lead = options_.rank == 0;
  return Report({lead ? ProgressLine(step, m, checkpoint) : "", &m, lead ? checkpoint : -1});
}

absl::Status WorkerLoop::Checkpoint(int64_t step) {
  // No rank of an ended attempt writes a checkpoint: the next attempt may already resume from the last one.
  ZF_RETURN_IF_ERROR(CheckNotAborted(absl::StrCat("the checkpoint of step ", step)));
  activity_->SetPhase("checkpoint");
  if (absl::Status saved = session_->SaveCheckpoint(
          plan_.checkpoint.dir, sharding::CheckpointOwnerExtra(job_id_, registered_.request_id(), step),
          plan_.checkpoint.keep);
      !saved.ok()) {
    return Fail(absl::StrCat("the checkpoint of step ", step, " failed"), saved);
  }
  saved_ = step;
  return absl::OkStatus();
}

absl::StatusOr<int> WorkerLoop::Preempted(int64_t step) {
  // Every rank got `stop` for this same step (the coordinator picked it), so the checkpoint is collective.
  int64_t checkpoint = -1;
  std::string what = "no checkpoint.dir: the next attempt starts over";
  if (!plan_.checkpoint.dir.empty()) {
    if (saved_ < step - 1) ZF_RETURN_IF_ERROR(Checkpoint(step - 1));
    checkpoint = saved_;
    what = saved_ >= 0 ? absl::StrCat("checkpoint at step ", saved_) : "nothing trained yet";
  }
  const bool lead = options_.rank == 0;
  ZF_RETURN_IF_ERROR(Report({lead ? absl::StrCat("preempted before step ", step, ": ", what,
                                                 "; exiting with code ", jobspec::kPreemptedExitCode)
                                  : "",
                             nullptr, lead ? checkpoint : -1, true, jobspec::kPreemptedExitCode}));
  return jobspec::kPreemptedExitCode;
}

std::string WorkerLoop::ProgressLine(int64_t step, const metrics::StepMetrics& m, int64_t checkpoint) const {
  // The ETA from the smoothed step time (smoothed_step_time.h), not from the mean since the attempt began:
  // the first step's warm-up and a change of pace (another job on the machine) fade within ~20 steps.
  const std::optional<absl::Duration> eta = step_time_->Remaining(plan_.steps - step - 1);
  const bool sft = plan_.task == "sft";
  std::string line =
      m.Get(names::kGrpoReward)
          ? absl::StrFormat(
                "step %d/%d  reward %.3f  acc %.3f  kl %.4f  len %.1f  lr %.3e  %.0f gen tok/s  ETA %s",
                step + 1, plan_.steps, ValueOr(m, names::kGrpoReward), ValueOr(m, names::kAccuracy),
                ValueOr(m, names::kGrpoKl), ValueOr(m, names::kGrpoCompletionLength),
                ValueOr(m, names::kLearningRate), ValueOr(m, names::kGrpoGenerationTokensPerS),
                eta ? FormatEta(*eta) : "?")
          : absl::StrFormat("step %d/%d  loss %.4f  %s  lr %.3e  %.0f %s/s  ETA %s", step + 1, plan_.steps,
                            ValueOr(m, names::kLoss), TaskFigures(m, "", true),
                            ValueOr(m, names::kLearningRate), ValueOr(m, names::kSamplesPerS),
                            sft ? "examples" : "pairs", eta ? FormatEta(*eta) : "?");
  if (auto allocated = m.Get(names::kDevicePeakAllocatedBytes)) {
    absl::StrAppend(&line, absl::StrFormat("  device peak %.2f/%.2f GiB", *allocated / kGiB,
                                           ValueOr(m, names::kDevicePeakReservedBytes) / kGiB));
    if (plan_.planned_peak.device_bytes > 0)
      absl::StrAppend(&line, absl::StrFormat(" (plan %.2f)", plan_.planned_peak.device_bytes / kGiB));
  }
  if (checkpoint >= 0) absl::StrAppend(&line, "  (checkpoint step ", checkpoint, ")");
  const std::string eval = names::kEvalPrefix;
  const std::optional<double> pairs = m.Get(eval + names::kEvalPairs);
  const std::optional<double> prompts = m.Get(eval + names::kEvalPrompts);
  if (pairs && *pairs > 0) {  // an evaluation without held-out data has nothing to show
    absl::StrAppend(&line,
                    absl::StrFormat("  | eval: held-out %s loss %.4f (%.0f %s)", TaskFigures(m, eval, false),
                                    ValueOr(m, eval + names::kLoss), *pairs, sft ? "examples" : "pairs"));
  } else if (prompts && *prompts > 0) {
    absl::StrAppend(&line, absl::StrFormat("  | eval: held-out acc %.3f (%.0f prompts, greedy)",
                                           ValueOr(m, eval + names::kAccuracy), *prompts));
  }
  return line;
}

absl::StatusOr<int> WorkerLoop::Finish() {
  if (!last_eval_) {  // no step ran in this attempt
    auto eval = session_->Evaluate();
    if (!eval.ok()) return Fail("evaluation failed", eval.status());
    last_eval_ = *std::move(eval);
  }
  if (!plan_.export_dir.empty()) {  // rank 0 writes; the others wait at the barrier below
    if (absl::Status exported = session_->Export(plan_.export_dir); !exported.ok()) {
      return Fail(absl::StrCat("export to ", plan_.export_dir, " failed"), exported);
    }
  }
  ZF_RETURN_IF_ERROR(options_.barrier(options_.barrier_timeout));
  metrics::StepMetrics eval;
  eval.values = *last_eval_;
  const std::string line = DoneLine(eval);
  ZF_RETURN_IF_ERROR(Report({options_.rank == 0 ? line : "", nullptr, -1, true, 0}));
  return 0;
}

}  // namespace zerofit::worker
