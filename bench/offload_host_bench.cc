// The offload pipeline's host work per step, side by side in one process, on the test device with host
// functions run as CUDA runs them (one at a time, on one thread: TestDeviceOptions::serial_host_functions)
// and no artificial delays:
// The two steps the engine runs, stage by stage (offload::OffloadPipeline; each receive is ReceiveGradient
// per bucket, then WaitGradients):
//   1 micro-batch   "receive, only": the D2H copy alone (the gradient stays in the bf16 staging); "norm,
//                   staged" (SumOfSquares: fp64 chunk sums across the pool, reading bf16); "update, staged"
//                   (CPU AdamW by tile reading bf16, each tile's H2D copy queued at once, and the H2D drain);
//   2 micro-batches "receive, first": the copy, then its conversion into the fp32 accumulator on the pool
//   once
//                   an event says it landed; "receive, last": the copy, then the addition; "norm, fp32" and
//                   "update, fp32" read the accumulator;
//   "receive, host-func": that addition as it was before issue 30, inside a Stream::HostFunc (CUDA:
//                   cudaLaunchHostFunc), which no thread count can speed up;
//   "norm, one chain": the norm as it was before, one fp64 addition chain in index order on one thread.
// Each stage is timed separately; each configuration runs `reps` times in round-robin order and medians are
// reported with the ratio to one thread.
//
//   offload_host_bench [--elements 33554432] [--buckets 8] [--reps 5] [--max-threads 2]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "device/test/test_device.h"
#include "offload/offload_pipeline.h"

namespace zerofit {
namespace {

struct Flags {
  size_t elements = size_t{1} << 25;
  size_t buckets = 8;
  int reps = 5;
  int max_threads = 2;
};

Flags Parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--elements")
      f.elements = std::strtoull(v, nullptr, 10);
    else if (k == "--buckets")
      f.buckets = std::strtoull(v, nullptr, 10);
    else if (k == "--reps")
      f.reps = std::atoi(v);
    else if (k == "--max-threads")
      f.max_threads = std::atoi(v);
    else {
      std::fprintf(stderr, "offload_host_bench: unknown flag %s\n", k.c_str());
      std::exit(2);
    }
  }
  if (f.elements == 0 || f.buckets == 0 || f.reps < 1 || f.max_threads < 1) {
    std::fprintf(stderr, "offload_host_bench: --elements, --buckets, --reps, --max-threads must be >= 1\n");
    std::exit(2);
  }
  return f;
}

double Seconds(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void Check(const absl::Status& s, const char* what) {
  if (s.ok()) return;
  std::fprintf(stderr, "offload_host_bench: %s: %s\n", what, s.ToString().c_str());
  std::exit(1);
}

// One configuration: a pipeline on its own test device, its "device" gradients and parameters.
class Setup {
 public:
  Setup(const Flags& f, int threads) : f_(f) {
    device::TestDeviceOptions o;
    o.max_delay = absl::ZeroDuration();
    o.vary_stream_speed = false;
    o.serial_host_functions = true;
    device_ = std::make_unique<device::TestDevice>(o);
    offload::OffloadPipelineOptions po;
    po.shard_numel = f.elements;
    po.param_dtype = core::DType::kBFloat16;
    po.threads = threads;
    auto p = offload::OffloadPipeline::Create(device_.get(), po);
    Check(p.status(), "OffloadPipeline::Create");
    pipeline_ = std::move(*p);
    grads_ = *device_->Allocate(f.elements * 2, device::MemoryKind::kDevice);
    params_ = *device_->Allocate(f.elements * 2, device::MemoryKind::kDevice);
    std::mt19937 rng(7);
    for (size_t i = 0; i < f.elements; ++i) {
      core::StoreFromFloat(grads_.data(), core::DType::kBFloat16, i, (rng() % 2001) * 1e-3f - 1.0f);
    }
    pipeline_->ZeroGradients(0);
    staging_.resize(f.elements * 2);
  }

  // One micro-batch's receives: the step's last (`last_of_step`) or not; through a host function instead.
  double Receive(bool last_of_step, bool in_host_function = false) {
    return Seconds([&] {
      const size_t per = (f_.elements + f_.buckets - 1) / f_.buckets;
      for (size_t off = 0; off < f_.elements; off += per) {
        const size_t n = std::min(per, f_.elements - off);
        if (in_host_function)
          ReceiveInHostFunction(off, n);
        else
          Check(pipeline_->ReceiveGradient(0, off, n, grads_.at(off * 2), last_of_step), "ReceiveGradient");
      }
      Check(pipeline_->WaitGradients(absl::Minutes(5)), "WaitGradients");
    });
  }

  // The gradient norm's sum of squares, across the pool.
  double Norm() {
    return Seconds([&] { sink_ += pipeline_->SumOfSquares(0); });
  }

  // The next step's buffer: zero in meaning (offload/range_set.h), nothing written.
  void Zero() { pipeline_->ZeroGradients(0); }

  // The sum of squares as it was before: one fp64 addition chain in index order, on the calling thread.
  double NormOneChain() {
    return Seconds([&] {
      const float* g = pipeline_->gradients(0);
      double sum = 0.0;
      for (size_t i = 0; i < f_.elements; ++i) sum += static_cast<double>(g[i]) * g[i];
      sink_ += sum;
    });
  }

  double Update() {
    offload::OffloadPipeline::Span span;
    span.numel = f_.elements;
    return Seconds([&] {
      pipeline_->Update({span}, 0, ++step_, 1.0f, params_.as<char>(), 0);
      Check(pipeline_->h2d_stream().Synchronize(absl::Minutes(5)), "H2D drain");
    });
  }

 private:
  // Before issue 30: the accumulation ran in the copy stream's host function, in stream order.
  void ReceiveInHostFunction(size_t off, size_t n) {
    char* dst = staging_.data() + off * 2;
    float* acc = pipeline_->gradients(0) + off;
    Check(pipeline_->d2h_stream().Copy(dst, grads_.at(off * 2), n * 2), "Copy");
    Check(pipeline_->d2h_stream().HostFunc([dst, acc, n] {
      core::AccumulateToFloat(dst, core::DType::kBFloat16, acc, n);
      return absl::OkStatus();
    }),
          "HostFunc");
  }

  Flags f_;
  std::unique_ptr<device::TestDevice> device_;
  std::unique_ptr<offload::OffloadPipeline> pipeline_;
  device::Buffer grads_, params_;
  std::vector<char> staging_;
  int64_t step_ = 0;
  double sink_ = 0.0;  // keeps the sums from being optimised away
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Run(const Flags& f) {
  std::printf(
      "offload_host_bench: %zu bf16 gradient elements in %zu buckets, %d reps (medians), test device "
      "with serial host functions\n",
      f.elements, f.buckets, f.reps);
  std::vector<std::unique_ptr<Setup>> setups;
  for (int t = 1; t <= f.max_threads; ++t) setups.push_back(std::make_unique<Setup>(f, t));
  std::map<std::string, std::vector<double>> times;  // "<what> <threads>"
  for (int r = 0; r < f.reps; ++r) {
    for (int t = 1; t <= f.max_threads; ++t) {
      Setup& s = *setups[t - 1];
      // A step of two micro-batches (then the host function's add, and the old norm, on it), then one of one.
      // This order keeps "receive, first" where the receive of 2026-11-27 and before was timed: after the
      // zeroing that followed the fp32 norm (timed after a staged update instead, it ran 1.5-2x slower here).
      const std::string n = " " + std::to_string(t);
      times["receive, first" + n].push_back(s.Receive(false));
      times["receive, last" + n].push_back(s.Receive(true));
      times["norm, fp32" + n].push_back(s.Norm());
      times["update, fp32" + n].push_back(s.Update());
      times["receive, host-func" + n].push_back(s.Receive(true, /*in_host_function=*/true));
      if (t == 1) times["norm, one chain 1"].push_back(s.NormOneChain());
      s.Zero();
      times["receive, only" + n].push_back(s.Receive(true));
      times["norm, staged" + n].push_back(s.Norm());
      times["update, staged" + n].push_back(s.Update());
      s.Zero();
    }
  }
  std::printf("%-22s %8s %12s %14s %12s\n", "stage", "threads", "median ms", "Melements/s", "vs 1 thread");
  for (const char* what :
       {"receive, only", "norm, staged", "update, staged", "receive, first", "receive, last", "norm, fp32",
        "update, fp32", "receive, host-func", "norm, one chain"}) {
    const double one = Median(times[std::string(what) + " 1"]);
    for (int t = 1; t <= f.max_threads; ++t) {
      if (times.count(std::string(what) + " " + std::to_string(t)) == 0) continue;
      const double m = Median(times[std::string(what) + " " + std::to_string(t)]);
      std::printf("%-22s %8d %12.1f %14.1f %11.2fx\n", what, t, m * 1e3, f.elements / m / 1e6, one / m);
    }
  }
  return 0;
}

}  // namespace
}  // namespace zerofit

int main(int argc, char** argv) { return zerofit::Run(zerofit::Parse(argc, argv)); }
