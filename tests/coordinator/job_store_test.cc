// The SQLite job store: idempotent submits under concurrency, logs and metrics with cursors, and nothing
// lost when the process holding it is killed.
#include "coordinator/job_store.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <thread>
#include <vector>

namespace zerofit::coordinator {
namespace {

namespace fs = std::filesystem;

std::string TempDb(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("zerofit_store_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / name).string();
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path + suffix);
  return path;
}

TEST(JobStoreTest, SubmitGetListUpdate) {
  auto store = JobStore::Open(":memory:");
  ASSERT_TRUE(store.ok()) << store.status();
  const absl::Time t0 = absl::FromUnixSeconds(1700000000);
  auto a = (*store)->Submit("req-a", "rm", "task: reward", t0);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->created);
  EXPECT_EQ(a->job.id, "job-000001");
  auto b = (*store)->Submit("req-b", "dpo", "task: dpo", t0);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->job.id, "job-000002");
  auto again = (*store)->Submit("req-a", "other name", "other spec", t0);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->job.id, "job-000001");
  EXPECT_EQ(again->job.spec, "task: reward") << "the first submit wins";
  JobStatus s = a->job.status;
  s.phase = JobPhase::kRestarting;
  s.attempt = 2;
  s.restarts = 1;
  s.checkpoint_step = 40;
  s.replan = true;
  s.reason = "rank 1 ran out of memory";
  s.since = t0 + absl::Seconds(5);
  ASSERT_TRUE((*store)->UpdateStatus("job-000001", s).ok());
  auto got = (*store)->Get("job-000001");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->status.phase, JobPhase::kRestarting);
  EXPECT_EQ(got->status.checkpoint_step, 40);
  EXPECT_TRUE(got->status.replan);
  EXPECT_EQ(got->status.reason, s.reason);
  EXPECT_EQ(got->status.since, s.since);
  EXPECT_EQ((*store)->Get("job-999999").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*store)->UpdateStatus("job-999999", s).code(), absl::StatusCode::kNotFound);
  auto all = (*store)->List();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[1].name, "dpo");
}

int ModeOf(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 0777) : -1;
}

TEST(JobStoreTest, OnlyItsOwnerCanReadTheStoreWhateverTheUmask) {
  const std::string path = TempDb("private.db");
  const mode_t old_umask = ::umask(022);
  {
    auto store = JobStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->Submit("req", "rm", "task: reward", absl::Now()).ok());
    for (const char* suffix : {"", "-wal", "-shm"}) {
      EXPECT_EQ(ModeOf(path + suffix), 0600) << path << suffix;
    }
  }
  // A store an older zerofit left readable by everyone is tightened when opened.
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  {
    auto store = JobStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_EQ(ModeOf(path), 0600);
    auto listed = (*store)->List();
    ASSERT_TRUE(listed.ok());
    EXPECT_EQ(listed->size(), 1u) << "the store's contents survive";
  }
  ::umask(old_umask);
}

TEST(JobStoreTest, HundredConcurrentSubmitsWithOneRequestIdCreateOneJob) {
  auto store = JobStore::Open(TempDb("concurrent.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  std::vector<std::thread> threads;
  std::vector<std::string> ids(100);
  std::vector<int> created(100, 0);
  for (int i = 0; i < 100; ++i) {
    threads.emplace_back([&, i] {
      auto r = (*store)->Submit("same-request", "job", "spec", absl::Now());
      if (r.ok()) {
        ids[i] = r->job.id;
        created[i] = r->created ? 1 : 0;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()), std::set<std::string>{"job-000001"});
  EXPECT_EQ(std::count(created.begin(), created.end(), 1), 1);
  EXPECT_EQ((*store)->List()->size(), 1u);
}

TEST(JobStoreTest, LogsAndMetricsResumeFromACursor) {
  auto store = JobStore::Open(":memory:");
  ASSERT_TRUE(store.ok());
  for (int i = 0; i < 5; ++i) {
    auto seq = (*store)->AppendLog("job-000001", "node1:" + std::to_string(i % 2),
                                   "line " + std::to_string(i), absl::Now());
    ASSERT_TRUE(seq.ok()) << seq.status();
    EXPECT_EQ(*seq, i + 1);
  }
  ASSERT_TRUE((*store)->AppendLog("job-000002", "node1:0", "other job", absl::Now()).ok());
  auto tail = (*store)->Logs("job-000001", 3);
  ASSERT_TRUE(tail.ok());
  ASSERT_EQ(tail->size(), 2u);
  EXPECT_EQ((*tail)[0].seq, 4);
  EXPECT_EQ((*tail)[0].source, "node1:1");
  EXPECT_EQ((*tail)[1].text, "line 4");
  for (int step = 1; step <= 3; ++step) {
    for (int rank = 0; rank < 2; ++rank) {
      MetricRow m{step, rank, 0.7 - 0.1 * step, 0.5 + 0.1 * step, 1000.0, int64_t{1} << 30, absl::Now(), {}};
      ASSERT_TRUE((*store)->AppendMetric("job-000001", m).ok());
    }
  }
  auto metrics = (*store)->Metrics("job-000001", 1);
  ASSERT_TRUE(metrics.ok());
  ASSERT_EQ(metrics->size(), 4u);
  EXPECT_EQ((*metrics)[0].step, 2);
  EXPECT_EQ((*metrics)[3].rank, 1);
  EXPECT_NEAR((*metrics)[3].loss, 0.4, 1e-12);
}

TEST(JobStoreTest, KillDashNineOfTheOwnerLosesNothingThatWasCommitted) {
  const std::string path = TempDb("killed.db");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The "coordinator": commits a job, a status and logs, then dies without closing anything.
    auto store = JobStore::Open(path);
    if (!store.ok()) _exit(2);
    auto job = (*store)->Submit("r1", "rm", "spec", absl::Now());
    if (!job.ok()) _exit(3);
    JobStatus s = job->job.status;
    s.phase = JobPhase::kRunning;
    s.attempt = 1;
    if (!(*store)->UpdateStatus(job->job.id, s).ok()) _exit(4);
    for (int i = 0; i < 50; ++i) {
      if (!(*store)->AppendLog(job->job.id, "n:0", "step " + std::to_string(i), absl::Now()).ok()) _exit(5);
    }
    kill(getpid(), SIGKILL);
    _exit(6);
  }
  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL) << "child status " << wstatus;
  auto store = JobStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto job = (*store)->Get("job-000001");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->status.phase, JobPhase::kRunning);
  auto logs = (*store)->Logs("job-000001", 0);
  ASSERT_TRUE(logs.ok());
  ASSERT_EQ(logs->size(), 50u);
  EXPECT_EQ(logs->back().text, "step 49");
}

TEST(JobStoreTest, AnUnopenablePathIsAClearError) {
  auto store = JobStore::Open("/nonexistent-dir/zerofit/jobs.db");
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("/nonexistent-dir/zerofit/jobs.db"), std::string::npos);
}

// The jobs table as the first release created it, without its closing parenthesis.
constexpr const char* kFirstJobsTable =
    "CREATE TABLE jobs (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL, request_id TEXT "
    "UNIQUE "
    "NOT NULL, name TEXT NOT NULL, spec TEXT NOT NULL, phase INTEGER NOT NULL, attempt INTEGER NOT NULL, "
    "restarts INTEGER NOT NULL, world_size INTEGER NOT NULL, checkpoint_step INTEGER NOT NULL, replan "
    "INTEGER "
    "NOT NULL, reason TEXT NOT NULL, since_us INTEGER NOT NULL, created_us INTEGER NOT NULL";

TEST(JobStoreTest, AStoreFromBeforeTheSlurmColumnsIsUpgradedInPlace) {
  const std::string path = TempDb("old_schema.db");
  {
    // The jobs table as the first release created it, with one job in it.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(
        sqlite3_exec(db,
                     (std::string(kFirstJobsTable) +
                      ");"
                      "INSERT INTO jobs VALUES (1, 'job-000001', 'r1', 'old', 'task: sft', 2, 1, 0, 2, 7, 0, "
                      "'', 0, 0);")
                         .c_str(),
                     nullptr, nullptr, nullptr),
        SQLITE_OK);
    sqlite3_close(db);
  }
  auto store = JobStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto old = (*store)->Get("job-000001");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->status.checkpoint_step, 7);
  EXPECT_EQ(old->status.interruptions, 0);
  EXPECT_EQ(old->slurm_job_id, "");
  JobStatus s = old->status;
  s.interruptions = 2;
  ASSERT_TRUE((*store)->UpdateStatus("job-000001", s).ok());
  ASSERT_TRUE((*store)->SetSlurmJobId("job-000001", "4242").ok());
  EXPECT_EQ((*store)->SetSlurmJobId("job-000009", "1").code(), absl::StatusCode::kNotFound);
  store->reset();
  auto reopened = JobStore::Open(path);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  auto j = (*reopened)->Get("job-000001");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->status.interruptions, 2);
  EXPECT_EQ(j->slurm_job_id, "4242");
}

// The jobs table's replanned_micro_batches and planned_world_size were retired when each attempt's plan
// got its own table: a new store does not create them, and a store that has them still takes jobs.
TEST(JobStoreTest, TheRetiredPlanColumnsAreNotCreatedAndDoNotHinderOldStores) {
  auto columns = [](const std::string& path) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    std::string names;
    sqlite3_exec(
        db, "PRAGMA table_info(jobs)",
        [](void* out, int, char** values, char**) {
          static_cast<std::string*>(out)->append(std::string(values[1]) + " ");
          return 0;
        },
        &names, nullptr);
    sqlite3_close(db);
    return names;
  };
  const std::string fresh = TempDb("fresh_columns.db");
  ASSERT_TRUE(JobStore::Open(fresh).ok());
  EXPECT_EQ(columns(fresh).find("planned_world_size"), std::string::npos) << columns(fresh);
  EXPECT_EQ(columns(fresh).find("replanned_micro_batches"), std::string::npos);
  const std::string old = TempDb("retired_columns.db");
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(old.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(
        sqlite3_exec(db,
                     (std::string(kFirstJobsTable) +
                      ", replanned_micro_batches INTEGER NOT NULL DEFAULT 0, planned_world_size INTEGER "
                      "NOT NULL DEFAULT 0);")
                         .c_str(),
                     nullptr, nullptr, nullptr),
        SQLITE_OK);
    sqlite3_close(db);
  }
  auto store = JobStore::Open(old);
  ASSERT_TRUE(store.ok()) << store.status();
  auto job = (*store)->Submit("req", "rm", "task: reward", absl::Now());
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE((*store)->Get(job->job.id).ok());
}

// Named metrics round-trip in order and exactly; a store whose metrics table predates them gains the column
// in place, its old rows read back with no named values.
TEST(JobStoreTest, NamedMetricsRoundTripAndOldMetricsTablesAreUpgraded) {
  const std::string path = TempDb("old_metrics.db");
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(
        sqlite3_exec(db,
                     "CREATE TABLE metrics (job_id TEXT NOT NULL, step INTEGER NOT NULL, rank INTEGER "
                     "NOT NULL, loss REAL, accuracy REAL, tokens_per_s REAL, peak_bytes INTEGER, time_us "
                     "INTEGER NOT NULL, PRIMARY KEY (job_id, step, rank));"
                     "INSERT INTO metrics VALUES ('job-000001', 0, 0, 0.69, 0.5, 10.0, 1024, 0);",
                     nullptr, nullptr, nullptr),
        SQLITE_OK);
    sqlite3_close(db);
  }
  auto store = JobStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  MetricRow m{1, 0, 0.5, 0.75, 100.0, 2048, absl::Now(), {}};
  m.named = {{"loss", 0.5}, {"lr", 1.0 / 3.0}, {"time/cpu_adamw_ms", 12.25}, {"reward/margin", -1e-300}};
  ASSERT_TRUE((*store)->AppendMetric("job-000001", m).ok());
  auto rows = (*store)->Metrics("job-000001");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_TRUE((*rows)[0].named.empty());
  EXPECT_NEAR((*rows)[0].loss, 0.69, 1e-12);
  EXPECT_EQ((*rows)[1].named, m.named);  // exact: 17 significant digits

  EXPECT_TRUE(ValidateNamedMetrics(m.named).ok());
  EXPECT_FALSE(ValidateNamedMetrics({{"bad name", 1.0}}).ok());
  EXPECT_FALSE(ValidateNamedMetrics({{"", 1.0}}).ok());
  EXPECT_FALSE(ValidateNamedMetrics({{std::string(129, 'x'), 1.0}}).ok());
  EXPECT_FALSE(
      ValidateNamedMetrics(std::vector<std::pair<std::string, double>>(kMaxNamedMetrics + 1, {"x", 1.0}))
          .ok());
}

}  // namespace
}  // namespace zerofit::coordinator
