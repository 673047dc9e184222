// The coordinator's durable state in one SQLite database (WAL journal, synchronous=FULL): jobs with their
// status, per-job log lines from every rank, per-step metrics. Every call is one transaction, so a `kill -9`
// of the coordinator loses nothing that a call already returned. Thread-safe (one connection, serialised).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/job_state.h"

struct sqlite3;

namespace zerofit::coordinator {

struct JobRecord {
  std::string id;          // "job-000001", in submission order
  std::string request_id;  // the client's idempotency key
  std::string name;
  std::string spec;  // the job spec as submitted
  JobStatus status;
  absl::Time created;
  std::string slurm_job_id;  // the Slurm job running it (`zerofit submit --slurm`), empty otherwise
  // Stored with the last attempt that formed (issue 20): its hosts (comma-separated, rank order), and, for
  // an attempt on fewer ranks than the spec's, what `zerofit status` shows ("2 of 4 ranks (1 node of 2:
  // node2 lost)"; empty at full size).
  std::string attempt_hosts;
  std::string attempt_note;
  // The stored resolved JobPlan (JSON) of the latest attempt (of the submit before any formed): what the
  // workers train by. Empty for a job stored by an older build (the coordinator resolves it again).
  std::string plan;
};

struct LogLine {
  int64_t seq = 0;     // per job, from 1; a stream resumes after the last seq it saw
  std::string source;  // "host:rank" or "coordinator"
  std::string text;
  absl::Time time;
};

struct MetricRow {
  int64_t step = 0;  // 0-based (core/lr_schedule.h)
  int rank = 0;
  double loss = 0, accuracy = 0, tokens_per_s = 0;
  int64_t peak_bytes = 0;
  absl::Time time;
  // The step's named metrics in the order the worker sent them (zerofit.v1 NamedValue). Names are 1..128
  // characters of [A-Za-z0-9_./-]; at most kMaxNamedMetrics of them.
  std::vector<std::pair<std::string, double>> named;
};
inline constexpr size_t kMaxNamedMetrics = 256;

// Checks a row's named metrics against the bounds above (the service refuses a report that breaks them).
absl::Status ValidateNamedMetrics(const std::vector<std::pair<std::string, double>>& named);

class JobStore {
 public:
  // Creates the database and its schema if needed; the file (and its -wal, -shm) is mode 0600, tightened if
  // it was not. `path` ":memory:" gives a private in-memory store.
  static absl::StatusOr<std::unique_ptr<JobStore>> Open(const std::string& path);
  ~JobStore();
  JobStore(const JobStore&) = delete;
  JobStore& operator=(const JobStore&) = delete;

  // Creates a queued job, or returns the job that `request_id` already created (created = false).
  struct SubmitResult {
    JobRecord job;
    bool created = false;
  };
  // `plan` (JSON, may be empty) is stored as attempt 0's, with the job.
  absl::StatusOr<SubmitResult> Submit(const std::string& request_id, const std::string& name,
                                      const std::string& spec, absl::Time now, const std::string& plan = "");
  absl::StatusOr<JobRecord> Get(const std::string& id);
  absl::StatusOr<std::vector<JobRecord>> List();
  absl::Status UpdateStatus(const std::string& id, const JobStatus& status);
  absl::Status SetSlurmJobId(const std::string& id, const std::string& slurm_job_id);
  // What an attempt formed with, in one transaction: its resolved plan (JSON) and hosts.
  struct AttemptRecord {
    int attempt = 0;  // 1, 2, ...: the attempt the plan is for
    std::string plan;
    std::string hosts;
    std::string note;
  };
  absl::Status SetAttemptPlan(const std::string& id, const AttemptRecord& attempt);
  // Stores `plan` (JSON) as attempt `attempt`'s, replacing one stored before.
  absl::Status PutPlan(const std::string& id, int attempt, const std::string& plan);
  // Every stored plan of the job, (attempt, JSON) oldest first; attempt 0 is the submit's.
  absl::StatusOr<std::vector<std::pair<int, std::string>>> Plans(const std::string& id);

  absl::StatusOr<int64_t> AppendLog(const std::string& job_id, const std::string& source,
                                    const std::string& text, absl::Time now);
  // Lines with seq > after, oldest first, at most `limit`.
  absl::StatusOr<std::vector<LogLine>> Logs(const std::string& job_id, int64_t after, int limit = 1000);
  absl::Status AppendMetric(const std::string& job_id, const MetricRow& row);
  // The training pairs' lengths rank 0 registered (what the step scheduler needs after a coordinator
  // restart).
  absl::Status PutSampleLengths(const std::string& job_id, const std::vector<int64_t>& lengths);
  absl::StatusOr<std::vector<int64_t>> SampleLengths(const std::string& job_id);  // empty if none
  absl::StatusOr<std::vector<MetricRow>> Metrics(const std::string& job_id, int64_t after_step = -1);

 private:
  JobStore(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  absl::Status Exec(const char* sql);
  absl::Status AddMissingColumns();
  absl::StatusOr<JobRecord> GetLocked(const std::string& id);
  absl::Status PutPlanLocked(const std::string& id, int attempt, const std::string& plan);

  std::mutex mu_;
  sqlite3* db_;  // owned; closed by the destructor
  std::string path_;
};

}  // namespace zerofit::coordinator
