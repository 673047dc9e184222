#include "coordinator/job_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/excerpt.h"
#include "core/status_macros.h"

namespace zerofit::coordinator {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS jobs (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT UNIQUE NOT NULL,
  request_id TEXT UNIQUE NOT NULL,
  name TEXT NOT NULL,
  spec TEXT NOT NULL,
  phase INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  restarts INTEGER NOT NULL,
  world_size INTEGER NOT NULL,
  checkpoint_step INTEGER NOT NULL,
  replan INTEGER NOT NULL,
  reason TEXT NOT NULL,
  since_us INTEGER NOT NULL,
  created_us INTEGER NOT NULL,
  interruptions INTEGER NOT NULL DEFAULT 0,
  slurm_job_id TEXT NOT NULL DEFAULT '',
  attempt_hosts TEXT NOT NULL DEFAULT '',
  attempt_note TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS logs (
  job_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  source TEXT NOT NULL,
  text TEXT NOT NULL,
  time_us INTEGER NOT NULL,
  PRIMARY KEY (job_id, seq));
CREATE TABLE IF NOT EXISTS sample_lengths (
  job_id TEXT PRIMARY KEY,
  lengths BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS metrics (
  job_id TEXT NOT NULL,
  step INTEGER NOT NULL,
  rank INTEGER NOT NULL,
  loss REAL, accuracy REAL, tokens_per_s REAL, peak_bytes INTEGER,
  time_us INTEGER NOT NULL,
  named TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (job_id, step, rank));
CREATE TABLE IF NOT EXISTS plans (
  job_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  plan TEXT NOT NULL,
  PRIMARY KEY (job_id, attempt));
)sql";

// Named metrics in one column: "name=value" lines, values with 17 significant digits (exact for doubles).
std::string EncodeNamed(const std::vector<std::pair<std::string, double>>& named) {
  std::string out;
  for (const auto& [name, value] : named) absl::StrAppendFormat(&out, "%s=%.17g\n", name, value);
  return out;
}

// Bounded: at most kMaxNamedMetrics lines; a line that does not parse is skipped (the store wrote it, so
// that is corruption, not input to trust).
std::vector<std::pair<std::string, double>> DecodeNamed(const std::string& text) {
  std::vector<std::pair<std::string, double>> named;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (named.size() >= kMaxNamedMetrics) break;
    const size_t eq = line.rfind('=');
    if (eq == absl::string_view::npos || eq == 0 || eq > 128) continue;
    const std::string value(line.substr(eq + 1));
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (end == value.c_str() || *end != '\0') continue;
    named.emplace_back(std::string(line.substr(0, eq)), v);
  }
  return named;
}

// The job store holds specs, paths and logs: readable by its owner only (mode 0600, whatever the umask). Its
// file is created here before SQLite opens it, because SQLite creates files 0644 and gives the -wal and -shm
// files the mode of the database; a store created 0644 by an older zerofit is tightened.
absl::Status MakeOwnerOnly(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot open the job store"));
  struct stat st;
  const bool ok = ::fstat(fd, &st) == 0 && ((st.st_mode & 077) == 0 || ::fchmod(fd, 0600) == 0);
  const int err = errno;
  ::close(fd);
  if (!ok)
    return absl::ErrnoToStatus(err, absl::StrCat(path, ": cannot make the job store private (chmod 600)"));
  for (const char* suffix : {"-wal", "-shm"}) {
    const std::string side = path + suffix;
    if (::chmod(side.c_str(), 0600) != 0 && errno != ENOENT) {
      return absl::ErrnoToStatus(errno, absl::StrCat(side, ": chmod 600"));
    }
  }
  return absl::OkStatus();
}

int64_t Micros(absl::Time t) { return absl::ToUnixMicros(t); }
absl::Time FromMicros(int64_t us) { return absl::FromUnixMicros(us); }

// A prepared statement; finalized on scope exit.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) { rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr); }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  absl::Status ok(const char* what) const {
    if (rc_ == SQLITE_OK) return absl::OkStatus();
    return absl::InternalError(absl::StrCat("sqlite prepare (", what, "): ", sqlite3_errmsg(db_)));
  }
  Stmt& Bind(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Stmt& Bind(int i, double v) {
    sqlite3_bind_double(stmt_, i, v);
    return *this;
  }
  sqlite3_stmt* raw() const { return stmt_; }
  // SQLITE_ROW, SQLITE_DONE, or an error code.
  int Step() { return sqlite3_step(stmt_); }
  int64_t Int(int c) const { return sqlite3_column_int64(stmt_, c); }
  double Real(int c) const { return sqlite3_column_double(stmt_, c); }
  std::string Text(int c) const {
    const unsigned char* t = sqlite3_column_text(stmt_, c);
    return t ? std::string(reinterpret_cast<const char*>(t),
                           static_cast<size_t>(sqlite3_column_bytes(stmt_, c)))
             : std::string();
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  int rc_ = SQLITE_OK;
};

absl::Status StepError(sqlite3* db, const char* what) {
  return absl::InternalError(absl::StrCat("sqlite (", what, "): ", sqlite3_errmsg(db)));
}

// Every row of a query, each read by `read`.
template <typename T, typename Read>
absl::StatusOr<std::vector<T>> AllRows(sqlite3* db, Stmt& q, const char* what, Read read) {
  std::vector<T> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) out.push_back(read(q));
  if (rc != SQLITE_DONE) return StepError(db, what);
  return out;
}

// One column of one job: `sql` is "UPDATE jobs SET <column> = ? WHERE id = ?". NotFound if there is no such
// job.
template <typename Value>
absl::Status SetJobField(sqlite3* db, const char* sql, const char* what, const std::string& id,
                         const Value& value) {
  Stmt u(db, sql);
  ZF_RETURN_IF_ERROR(u.ok(what));
  u.Bind(1, value).Bind(2, id);
  if (u.Step() != SQLITE_DONE) return StepError(db, what);
  if (sqlite3_changes(db) == 0) return absl::NotFoundError(absl::StrCat("no job '", core::Excerpt(id), "'"));
  return absl::OkStatus();
}

constexpr const char* kJobColumns =
    "id, request_id, name, spec, phase, attempt, restarts, world_size, checkpoint_step, replan, reason, "
    "since_us, created_us, interruptions, slurm_job_id, attempt_hosts, attempt_note, "
    "COALESCE((SELECT plan FROM plans WHERE plans.job_id = jobs.id ORDER BY attempt DESC LIMIT 1), '')";

JobRecord ReadJob(const Stmt& s) {
  JobRecord j;
  j.id = s.Text(0);
  j.request_id = s.Text(1);
  j.name = s.Text(2);
  j.spec = s.Text(3);
  j.status.phase = static_cast<JobPhase>(s.Int(4));
  j.status.attempt = static_cast<int>(s.Int(5));
  j.status.restarts = static_cast<int>(s.Int(6));
  j.status.world_size = static_cast<int>(s.Int(7));
  j.status.checkpoint_step = s.Int(8);
  j.status.replan = s.Int(9) != 0;
  j.status.reason = s.Text(10);
  j.status.since = FromMicros(s.Int(11));
  j.created = FromMicros(s.Int(12));
  j.status.interruptions = static_cast<int>(s.Int(13));
  j.slurm_job_id = s.Text(14);
  j.attempt_hosts = s.Text(15);
  j.attempt_note = s.Text(16);
  j.plan = s.Text(17);
  return j;
}

bool IsMetricName(absl::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  for (char c : name) {
    if (!(absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '/' ||
          c == '-')) {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::Status ValidateNamedMetrics(const std::vector<std::pair<std::string, double>>& named) {
  if (named.size() > kMaxNamedMetrics) {
    return absl::InvalidArgumentError(
        absl::StrCat(named.size(), " named metrics in one report; at most ", kMaxNamedMetrics));
  }
  for (const auto& [name, value] : named) {
    if (!IsMetricName(name)) {
      return absl::InvalidArgumentError(absl::StrCat("metric name '", absl::CHexEscape(name.substr(0, 140)),
                                                     "' is not 1..128 characters of [A-Za-z0-9_./-]"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<JobStore>> JobStore::Open(const std::string& path) {
  if (path != ":memory:") ZF_RETURN_IF_ERROR(MakeOwnerOnly(path));
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db,
                                 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return absl::UnavailableError(absl::StrCat(path, ": cannot open the job store: ", msg));
  }
  std::unique_ptr<JobStore> store(new JobStore(db, path));
  sqlite3_busy_timeout(db, 10000);  // another process holding the lock: wait up to 10 s, then fail
  if (path != ":memory:") ZF_RETURN_IF_ERROR(store->Exec("PRAGMA journal_mode=WAL"));
  ZF_RETURN_IF_ERROR(store->Exec("PRAGMA synchronous=FULL"));
  ZF_RETURN_IF_ERROR(store->Exec(kSchema));
  ZF_RETURN_IF_ERROR(store->AddMissingColumns());
  return store;
}

JobStore::~JobStore() { sqlite3_close(db_); }

// Columns added after the first release, for job stores created before them.
absl::Status JobStore::AddMissingColumns() {
  std::set<std::string> have;
  {
    Stmt q(db_, "PRAGMA table_info(jobs)");
    ZF_RETURN_IF_ERROR(q.ok("table_info"));
    int rc;
    while ((rc = q.Step()) == SQLITE_ROW) have.insert(q.Text(1));
    if (rc != SQLITE_DONE) return StepError(db_, "table_info");
  }
  if (!have.count("interruptions")) {
    ZF_RETURN_IF_ERROR(Exec("ALTER TABLE jobs ADD COLUMN interruptions INTEGER NOT NULL DEFAULT 0"));
  }
  if (!have.count("slurm_job_id")) {
    ZF_RETURN_IF_ERROR(Exec("ALTER TABLE jobs ADD COLUMN slurm_job_id TEXT NOT NULL DEFAULT ''"));
  }
  // (Stores of older builds may also hold replanned_micro_batches and planned_world_size, no longer read
  // or written since each attempt's plan is stored in `plans`; they keep them.)
  for (const char* column :
       {"attempt_hosts TEXT NOT NULL DEFAULT ''", "attempt_note TEXT NOT NULL DEFAULT ''"}) {
    const std::string name(column, std::string(column).find(' '));
    if (!have.count(name))
      ZF_RETURN_IF_ERROR(Exec(absl::StrCat("ALTER TABLE jobs ADD COLUMN ", column).c_str()));
  }
  std::set<std::string> metric_columns;
  {
    Stmt q(db_, "PRAGMA table_info(metrics)");
    ZF_RETURN_IF_ERROR(q.ok("table_info"));
    int rc;
    while ((rc = q.Step()) == SQLITE_ROW) metric_columns.insert(q.Text(1));
    if (rc != SQLITE_DONE) return StepError(db_, "table_info");
  }
  if (!metric_columns.count("named")) {  // stores from before named metrics: their rows keep '' (none)
    ZF_RETURN_IF_ERROR(Exec("ALTER TABLE metrics ADD COLUMN named TEXT NOT NULL DEFAULT ''"));
  }
  return absl::OkStatus();
}

absl::Status JobStore::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return absl::InternalError(absl::StrCat(path_, ": sqlite: ", msg));
  }
  return absl::OkStatus();
}

absl::StatusOr<JobStore::SubmitResult> JobStore::Submit(const std::string& request_id,
                                                        const std::string& name, const std::string& spec,
                                                        absl::Time now, const std::string& plan) {
  if (request_id.empty()) return absl::InvalidArgumentError("Submit: request_id is empty");
  std::lock_guard<std::mutex> lock(mu_);
  ZF_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  auto body = [&]() -> absl::StatusOr<SubmitResult> {
    {
      Stmt q(db_, absl::StrCat("SELECT ", kJobColumns, " FROM jobs WHERE request_id = ?").c_str());
      ZF_RETURN_IF_ERROR(q.ok("find request"));
      q.Bind(1, request_id);
      const int rc = q.Step();
      if (rc == SQLITE_ROW) return SubmitResult{ReadJob(q), false};
      if (rc != SQLITE_DONE) return StepError(db_, "find request");
    }
    int64_t next = 1;
    {
      Stmt q(db_, "SELECT COALESCE(MAX(seq), 0) + 1 FROM jobs");
      ZF_RETURN_IF_ERROR(q.ok("next id"));
      if (q.Step() != SQLITE_ROW) return StepError(db_, "next id");
      next = q.Int(0);
    }
    JobRecord j;
    j.id = absl::StrFormat("job-%06d", next);
    j.request_id = request_id;
    j.name = name;
    j.spec = spec;
    j.status.since = now;
    j.created = now;
    Stmt ins(db_,
             "INSERT INTO jobs (seq, id, request_id, name, spec, phase, attempt, restarts, world_size, "
             "checkpoint_step, replan, reason, since_us, created_us) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    ZF_RETURN_IF_ERROR(ins.ok("insert job"));
    ins.Bind(1, next).Bind(2, j.id).Bind(3, request_id).Bind(4, name).Bind(5, spec);
    ins.Bind(6, static_cast<int64_t>(j.status.phase))
        .Bind(7, int64_t{0})
        .Bind(8, int64_t{0})
        .Bind(9, int64_t{0});
    ins.Bind(10, j.status.checkpoint_step).Bind(11, int64_t{0}).Bind(12, std::string()).Bind(13, Micros(now));
    ins.Bind(14, Micros(now));
    if (ins.Step() != SQLITE_DONE) return StepError(db_, "insert job");
    if (!plan.empty()) ZF_RETURN_IF_ERROR(PutPlanLocked(j.id, 0, plan));
    j.plan = plan;
    return SubmitResult{j, true};
  };
  auto result = body();
  if (!result.ok()) {
    (void)Exec("ROLLBACK");
    return result.status();
  }
  ZF_RETURN_IF_ERROR(Exec("COMMIT"));
  return result;
}

absl::StatusOr<JobRecord> JobStore::GetLocked(const std::string& id) {
  Stmt q(db_, absl::StrCat("SELECT ", kJobColumns, " FROM jobs WHERE id = ?").c_str());
  ZF_RETURN_IF_ERROR(q.ok("get job"));
  q.Bind(1, id);
  const int rc = q.Step();
  if (rc == SQLITE_ROW) return ReadJob(q);
  if (rc == SQLITE_DONE) return absl::NotFoundError(absl::StrCat("no job '", core::Excerpt(id), "'"));
  return StepError(db_, "get job");
}

absl::StatusOr<JobRecord> JobStore::Get(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  return GetLocked(id);
}

absl::StatusOr<std::vector<JobRecord>> JobStore::List() {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt q(db_, absl::StrCat("SELECT ", kJobColumns, " FROM jobs ORDER BY seq").c_str());
  ZF_RETURN_IF_ERROR(q.ok("list jobs"));
  return AllRows<JobRecord>(db_, q, "list jobs", ReadJob);
}

absl::Status JobStore::UpdateStatus(const std::string& id, const JobStatus& s) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt u(db_,
         "UPDATE jobs SET phase = ?, attempt = ?, restarts = ?, world_size = ?, checkpoint_step = ?, replan "
         "= ?, reason = ?, since_us = ?, interruptions = ? WHERE id = ?");
  ZF_RETURN_IF_ERROR(u.ok("update job"));
  u.Bind(1, static_cast<int64_t>(s.phase)).Bind(2, static_cast<int64_t>(s.attempt));
  u.Bind(3, static_cast<int64_t>(s.restarts)).Bind(4, static_cast<int64_t>(s.world_size));
  u.Bind(5, s.checkpoint_step).Bind(6, static_cast<int64_t>(s.replan ? 1 : 0)).Bind(7, s.reason);
  u.Bind(8, Micros(s.since)).Bind(9, static_cast<int64_t>(s.interruptions)).Bind(10, id);
  if (u.Step() != SQLITE_DONE) return StepError(db_, "update job");
  if (sqlite3_changes(db_) == 0) return absl::NotFoundError(absl::StrCat("no job '", core::Excerpt(id), "'"));
  return absl::OkStatus();
}

absl::Status JobStore::PutPlanLocked(const std::string& id, int attempt, const std::string& plan) {
  Stmt ins(db_, "INSERT OR REPLACE INTO plans (job_id, attempt, plan) VALUES (?,?,?)");
  ZF_RETURN_IF_ERROR(ins.ok("store plan"));
  ins.Bind(1, id).Bind(2, static_cast<int64_t>(attempt)).Bind(3, plan);
  if (ins.Step() != SQLITE_DONE) return StepError(db_, "store plan");
  return absl::OkStatus();
}

absl::Status JobStore::PutPlan(const std::string& id, int attempt, const std::string& plan) {
  std::lock_guard<std::mutex> lock(mu_);
  return PutPlanLocked(id, attempt, plan);
}

absl::Status JobStore::SetAttemptPlan(const std::string& id, const AttemptRecord& a) {
  std::lock_guard<std::mutex> lock(mu_);
  ZF_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  auto body = [&]() -> absl::Status {
    Stmt u(db_, "UPDATE jobs SET attempt_hosts = ?, attempt_note = ? WHERE id = ?");
    ZF_RETURN_IF_ERROR(u.ok("set attempt plan"));
    u.Bind(1, a.hosts).Bind(2, a.note).Bind(3, id);
    if (u.Step() != SQLITE_DONE) return StepError(db_, "set attempt plan");
    if (sqlite3_changes(db_) == 0)
      return absl::NotFoundError(absl::StrCat("no job '", core::Excerpt(id), "'"));
    return PutPlanLocked(id, a.attempt, a.plan);
  };
  if (absl::Status s = body(); !s.ok()) {
    (void)Exec("ROLLBACK");
    return s;
  }
  return Exec("COMMIT");
}

absl::StatusOr<std::vector<std::pair<int, std::string>>> JobStore::Plans(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt q(db_, "SELECT attempt, plan FROM plans WHERE job_id = ? ORDER BY attempt");
  ZF_RETURN_IF_ERROR(q.ok("list plans"));
  q.Bind(1, id);
  return AllRows<std::pair<int, std::string>>(db_, q, "list plans", [](const Stmt& r) {
    return std::pair<int, std::string>(static_cast<int>(r.Int(0)), r.Text(1));
  });
}

absl::Status JobStore::SetSlurmJobId(const std::string& id, const std::string& slurm_job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  return SetJobField(db_, "UPDATE jobs SET slurm_job_id = ? WHERE id = ?", "set slurm job id", id,
                     slurm_job_id);
}

absl::StatusOr<int64_t> JobStore::AppendLog(const std::string& job_id, const std::string& source,
                                            const std::string& text, absl::Time now) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt ins(db_,
           "INSERT INTO logs (job_id, seq, source, text, time_us) SELECT ?1, COALESCE(MAX(seq), 0) + 1, ?2, "
           "?3, ?4 "
           "FROM logs WHERE job_id = ?1 RETURNING seq");
  ZF_RETURN_IF_ERROR(ins.ok("append log"));
  ins.Bind(1, job_id).Bind(2, source).Bind(3, text).Bind(4, Micros(now));
  if (ins.Step() != SQLITE_ROW) return StepError(db_, "append log");
  const int64_t seq = ins.Int(0);
  if (ins.Step() != SQLITE_DONE) return StepError(db_, "append log");
  return seq;
}

absl::StatusOr<std::vector<LogLine>> JobStore::Logs(const std::string& job_id, int64_t after, int limit) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt q(db_,
         "SELECT seq, source, text, time_us FROM logs WHERE job_id = ? AND seq > ? ORDER BY seq LIMIT ?");
  ZF_RETURN_IF_ERROR(q.ok("read logs"));
  q.Bind(1, job_id).Bind(2, after).Bind(3, static_cast<int64_t>(limit));
  return AllRows<LogLine>(db_, q, "read logs", [](const Stmt& r) {
    return LogLine{r.Int(0), r.Text(1), r.Text(2), FromMicros(r.Int(3))};
  });
}

absl::Status JobStore::AppendMetric(const std::string& job_id, const MetricRow& m) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt ins(db_,
           "INSERT OR REPLACE INTO metrics (job_id, step, rank, loss, accuracy, tokens_per_s, peak_bytes, "
           "time_us, named) "
           "VALUES (?,?,?,?,?,?,?,?,?)");
  ZF_RETURN_IF_ERROR(ins.ok("append metric"));
  ins.Bind(1, job_id)
      .Bind(2, m.step)
      .Bind(3, static_cast<int64_t>(m.rank))
      .Bind(4, m.loss)
      .Bind(5, m.accuracy);
  ins.Bind(6, m.tokens_per_s).Bind(7, m.peak_bytes).Bind(8, Micros(m.time)).Bind(9, EncodeNamed(m.named));
  if (ins.Step() != SQLITE_DONE) return StepError(db_, "append metric");
  return absl::OkStatus();
}

absl::Status JobStore::PutSampleLengths(const std::string& job_id, const std::vector<int64_t>& lengths) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt ins(db_, "INSERT OR REPLACE INTO sample_lengths (job_id, lengths) VALUES (?, ?)");
  ZF_RETURN_IF_ERROR(ins.ok("store sample lengths"));
  ins.Bind(1, job_id);
  sqlite3_bind_blob(ins.raw(), 2, lengths.data(), static_cast<int>(lengths.size() * sizeof(int64_t)),
                    SQLITE_TRANSIENT);
  if (ins.Step() != SQLITE_DONE) return StepError(db_, "store sample lengths");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> JobStore::SampleLengths(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt q(db_, "SELECT lengths FROM sample_lengths WHERE job_id = ?");
  ZF_RETURN_IF_ERROR(q.ok("read sample lengths"));
  q.Bind(1, job_id);
  const int rc = q.Step();
  if (rc == SQLITE_DONE) return std::vector<int64_t>();
  if (rc != SQLITE_ROW) return StepError(db_, "read sample lengths");
  const void* blob = sqlite3_column_blob(q.raw(), 0);
  const size_t bytes = static_cast<size_t>(sqlite3_column_bytes(q.raw(), 0));
  std::vector<int64_t> lengths(bytes / sizeof(int64_t));
  if (bytes > 0) std::memcpy(lengths.data(), blob, lengths.size() * sizeof(int64_t));
  return lengths;
}

absl::StatusOr<std::vector<MetricRow>> JobStore::Metrics(const std::string& job_id, int64_t after_step) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt q(db_,
         "SELECT step, rank, loss, accuracy, tokens_per_s, peak_bytes, time_us, named FROM metrics WHERE "
         "job_id = ? AND step > ? ORDER BY step, rank");
  ZF_RETURN_IF_ERROR(q.ok("read metrics"));
  q.Bind(1, job_id).Bind(2, after_step);
  return AllRows<MetricRow>(db_, q, "read metrics", [](const Stmt& r) {
    return MetricRow{r.Int(0),
                     static_cast<int>(r.Int(1)),
                     r.Real(2),
                     r.Real(3),
                     r.Real(4),
                     r.Int(5),
                     FromMicros(r.Int(6)),
                     DecodeNamed(r.Text(7))};
  });
}

}  // namespace zerofit::coordinator
