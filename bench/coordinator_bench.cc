// The coordinator alone on loopback: AcquireStep latency (p50/p99) and heartbeats handled per second with
// 1,000 simulated workers (one job of world size 1,000; client threads play the ranks).
//   coordinator_bench [--workers 1000] [--threads 8] [--seconds 3] [--acquires 4000]
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "coordinator/service.h"
#include "zerofit/v1/coordinator.grpc.pb.h"

namespace {

namespace v1 = ::zerofit::v1;
constexpr const char* kToken = "bench-token-0123456789abcdef01234567";

std::unique_ptr<grpc::ClientContext> Context() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  ctx->AddMetadata("authorization", absl::StrCat("Bearer ", kToken));
  return ctx;
}

// Registers every rank of the job (rank 0 brings 100,000 sample lengths); false after printing why.
bool RegisterRanks(v1::Workers::Stub& stub, const std::string& job_id, int workers) {
  for (int r = 0; r < workers; ++r) {
    v1::RegisterWorkerRequest req;
    req.set_job_id(job_id);
    req.set_rank(r);
    req.set_world_size(workers);
    req.set_host("sim");
    if (r == 0)
      for (int i = 0; i < 100000; ++i) req.add_sample_lengths(64 + i % 1024);
    v1::RegisterWorkerResponse resp;
    const grpc::Status s = stub.Register(Context().get(), req, &resp);
    if (!s.ok()) {
      std::fprintf(stderr, "register %d: %s\n", r, s.error_message().c_str());
      return false;
    }
  }
  return true;
}

// AcquireStep latencies in microseconds, sorted: `acquires` calls from `threads` clients at once, each call
// a different rank.
std::vector<double> AcquireLatencies(v1::Workers::Stub& stub, const std::string& job_id, int workers,
                                     int threads, int acquires) {
  std::vector<double> latencies_us(static_cast<size_t>(acquires));
  std::atomic<int> next{0};
  auto acquire = [&] {
    int i;
    while ((i = next.fetch_add(1)) < acquires) {
      v1::AcquireStepRequest req;
      req.set_job_id(job_id);
      req.set_rank(i % workers);
      req.set_step(i / workers);
      v1::AcquireStepResponse resp;
      const auto t0 = std::chrono::steady_clock::now();
      if (!stub.AcquireStep(Context().get(), req, &resp).ok()) std::abort();
      latencies_us[static_cast<size_t>(i)] =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(acquire);
  for (auto& t : pool) t.join();
  std::sort(latencies_us.begin(), latencies_us.end());
  return latencies_us;
}

struct HeartbeatRate {
  double per_second, elapsed_seconds;
};

// Heartbeats per second for about `seconds`: every thread cycles through its share of the ranks.
HeartbeatRate HeartbeatsPerSecond(v1::Workers::Stub& stub, const std::string& job_id, int workers,
                                  int threads, double seconds) {
  std::atomic<int64_t> beats{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int r = t; !stop.load(); r = (r + threads) % workers) {
        v1::HeartbeatRequest req;
        req.set_job_id(job_id);
        req.set_rank(r);
        v1::HeartbeatResponse resp;
        if (!stub.Heartbeat(Context().get(), req, &resp).ok()) std::abort();
        beats.fetch_add(1);
      }
    });
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop.store(true);
  for (auto& t : pool) t.join();
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {static_cast<double>(beats.load()) / elapsed, elapsed};
}

int Run(int workers, int threads, double seconds, int acquires) {
  zerofit::core::RealClock clock;
  zerofit::coordinator::ServerOptions o;
  o.db_path = ":memory:";
  o.token = kToken;
  o.policy.heartbeat_timeout = absl::Seconds(60);
  auto server = zerofit::coordinator::CoordinatorServer::Start(o, &clock);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return 1;
  }
  auto channel = grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials());
  auto jobs = v1::Jobs::NewStub(channel);
  auto stub = v1::Workers::NewStub(channel);
  v1::SubmitJobRequest sub;
  sub.set_request_id("bench");
  sub.set_spec(absl::StrCat("task: reward\nmodel: m\ndata: d\nworld_size: ", workers,
                            "\ntraining:\n  global_batch: ", 4 * workers,
                            "\n  micro_batch: 2\n"
                            "  gradient_accumulation: 2\n"));
  v1::SubmitJobResponse job;
  if (!jobs->Submit(Context().get(), sub, &job).ok()) return 1;
  if (!RegisterRanks(*stub, job.job().id(), workers)) return 1;
  const std::vector<double> latencies_us =
      AcquireLatencies(*stub, job.job().id(), workers, threads, acquires);
  const double p50 = latencies_us[latencies_us.size() / 2];
  const double p99 = latencies_us[latencies_us.size() * 99 / 100];
  const HeartbeatRate beats = HeartbeatsPerSecond(*stub, job.job().id(), workers, threads, seconds);
  std::printf(
      "coordinator_bench: %d workers, %d client threads, %d AcquireStep calls: p50 %.0f us, p99 %.0f us; "
      "heartbeats %.0f /s over %.1f s\n",
      workers, threads, acquires, p50, p99, beats.per_second, beats.elapsed_seconds);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int workers = 1000, threads = 8, acquires = 4000;
  double seconds = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    bool ok = false;
    if (a == "--workers") ok = absl::SimpleAtoi(argv[i + 1], &workers) && workers > 0;
    if (a == "--threads") ok = absl::SimpleAtoi(argv[i + 1], &threads) && threads > 0;
    if (a == "--acquires") ok = absl::SimpleAtoi(argv[i + 1], &acquires) && acquires > 0;
    if (a == "--seconds") ok = absl::SimpleAtod(argv[i + 1], &seconds) && seconds > 0;
    if (!ok) {
      std::fprintf(stderr,
                   "usage: coordinator_bench [--workers N] [--threads T] [--seconds S] [--acquires N]\n");
      return 2;
    }
  }
  return Run(workers, threads, seconds, acquires);
}
