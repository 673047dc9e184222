// CPU AdamW throughput, side by side in one process: zerofit's kernels (scalar oracle, AVX2, AVX-512) on 1..T
// threads vs LibTorch's torch::optim::AdamW on the same number of parameters and threads, and vs the memory
// bandwidth bound (bytes touched per parameter / STREAM-triad bandwidth measured here with the same threads);
// then the 8-bit step (scalar oracle, AVX2, AVX-512) with the same threads.
//
//   cpu_adamw_bench [--n 67108864] [--reps 7] [--max-threads 2]
//
// Each configuration runs `reps` times in round-robin order (so drift hits all alike); medians are reported.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "device/device.h"
#include "optim/adamw_8bit.h"
#include "optim/cpu_adamw.h"
#include "worker/torch/train/torch_adamw_baseline.h"

namespace zerofit {
namespace {

// Bandwidth probes, written with AVX2 intrinsics so that they are limited by memory, not by instruction count
// (a scalar loop keeps fewer cache lines in flight per core and under-reports what the memory system gives).
// STREAM triad a = b + s*c: 12 bytes per element (2 reads, 1 write).
__attribute__((target("avx2,fma"))) void TriadAvx2(float* a, const float* b, const float* c, size_t lo,
                                                   size_t hi) {
  const __m256 s = _mm256_set1_ps(1.0001f);
  size_t i = lo;
  for (; i + 8 <= hi; i += 8) {
    _mm256_storeu_ps(a + i, _mm256_fmadd_ps(s, _mm256_loadu_ps(c + i), _mm256_loadu_ps(b + i)));
  }
  for (; i < hi; ++i) a[i] = b[i] + 1.0001f * c[i];
}

// The AdamW access pattern with trivial arithmetic: read p, g, m, v and write p, m, v (28 bytes per element).
// One core's bandwidth depends on how many streams it keeps in flight, so this is the tighter roof for AdamW.
__attribute__((target("avx2,fma"))) void SevenStreamsAvx2(float* p, const float* g, float* m, float* v,
                                                          size_t lo, size_t hi) {
  size_t i = lo;
  for (; i + 8 <= hi; i += 8) {
    const __m256 x = _mm256_loadu_ps(g + i);
    _mm256_storeu_ps(p + i, _mm256_add_ps(_mm256_loadu_ps(p + i), x));
    _mm256_storeu_ps(m + i, _mm256_add_ps(_mm256_loadu_ps(m + i), x));
    _mm256_storeu_ps(v + i, _mm256_add_ps(_mm256_loadu_ps(v + i), x));
  }
  for (; i < hi; ++i) {
    p[i] += g[i];
    m[i] += g[i];
    v[i] += g[i];
  }
}

double Seconds(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Config {
  std::string name;
  std::function<void()> run;
  double bytes_per_param;  // bytes a single pass reads + writes, STREAM convention
  std::vector<double> seconds;
};

struct Flags {
  size_t n = size_t{1} << 26;  // 256 MiB per fp32 array: far beyond any last-level cache
  int reps = 7;
  int max_threads = 2;
};

// Flags from the command line; nothing (after printing why) on an unknown flag or a value out of range.
std::optional<Flags> ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--n" && i + 1 < argc) {
      f.n = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--reps" && i + 1 < argc) {
      f.reps = std::atoi(argv[++i]);
    } else if (a == "--max-threads" && i + 1 < argc) {
      f.max_threads = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "unknown flag '%s'; flags: --n --reps --max-threads\n", a.c_str());
      return std::nullopt;
    }
  }
  if (f.n == 0 || f.reps < 1 || f.max_threads < 1) {
    std::fprintf(stderr, "--n, --reps and --max-threads must be positive\n");
    return std::nullopt;
  }
  return f;
}

// Everything the configurations' closures point at: the host arrays (n elements each), the thread pools and
// the optimizers, kept alive for the whole run.
struct Bench {
  explicit Bench(size_t n_) : n(n_) {
    for (device::Buffer* b : {&p, &m, &v, &g32, &out32, &m2, &v2}) *b = Allocate(n * 4);
    g16 = Allocate(n * 2);
    out16 = Allocate(n * 2);
    for (device::Buffer* b : {&mq, &vq}) *b = Allocate(n);
    for (device::Buffer* b : {&m_absmax, &v_absmax}) *b = Allocate(optim::QuantBlocks(n) * 4);
    std::mt19937 rng(1);
    std::normal_distribution<float> normal;
    for (size_t i = 0; i < n; ++i) {
      p.as<float>()[i] = normal(rng);
      g32.as<float>()[i] = 1e-2f * normal(rng);
      g16.as<uint16_t>()[i] = core::FloatToBf16(g32.as<float>()[i]);
    }
    // 8-bit moments start as quantised zeros.
    const optim::HostAdamW8bitMaps maps;
    const std::vector<float> zeros(n, 0.0f);
    optim::Quantize(maps.m.data(), zeros.data(), n, mq.as<uint8_t>(), m_absmax.as<float>());
    optim::Quantize(maps.v.data(), zeros.data(), n, vq.as<uint8_t>(), v_absmax.as<float>());
  }
  static device::Buffer Allocate(size_t bytes) {
    return std::move(*device::AllocateHostMemory(bytes, device::MemoryKind::kPageable));
  }

  size_t n;
  device::Buffer p, m, v, g32, g16, out16, out32, m2, v2;
  device::Buffer mq, vq, m_absmax, v_absmax;  // 8-bit moments
  optim::AdamWHyper hyper;
  int64_t step = 0;
  std::vector<Config> configs;
  std::vector<std::unique_ptr<optim::CpuAdamW>> runners;
  std::vector<std::unique_ptr<worker::TorchAdamWBaseline>> torch_runs;
  std::vector<std::unique_ptr<core::ThreadPool>> pools;
};

// The two bandwidth roofs on t threads: the STREAM triad a = b + s*c (12 bytes per element; m, v and the fp32
// gradient as a, b, c) and the AdamW access pattern (28 bytes per element).
void AddBandwidthProbes(Bench& b, int t) {
  b.pools.push_back(std::make_unique<core::ThreadPool>(t));
  core::ThreadPool* pool = b.pools.back().get();
  const size_t n = b.n, tasks = static_cast<size_t>(t), chunk = (n + t - 1) / t;
  auto on_chunks = [pool, n, tasks, chunk](std::function<void(size_t, size_t)> fn) {
    return [pool, n, tasks, chunk, fn] {
      pool->ParallelFor(tasks, [&](size_t k) { fn(k * chunk, std::min(n, k * chunk + chunk)); });
    };
  };
  b.configs.push_back({"triad " + std::to_string(t) + "T",
                       on_chunks([&b](size_t lo, size_t hi) {
                         TriadAvx2(b.m.as<float>(), b.v.as<float>(), b.g32.as<float>(), lo, hi);
                       }),
                       12.0,
                       {}});
  b.configs.push_back({"same-streams probe " + std::to_string(t) + "T",
                       on_chunks([&b](size_t lo, size_t hi) {
                         SevenStreamsAvx2(b.out32.as<float>(), b.g32.as<float>(), b.m2.as<float>(),
                                          b.v2.as<float>(), lo, hi);
                       }),
                       28.0,
                       {}});
}

// LibTorch's AdamW, then each of zerofit's kernels this CPU runs (fp32 gradients; bf16 gradients with a bf16
// parameter copy), on t threads.
void AddAdamWRuns(Bench& b, int t) {
  b.torch_runs.push_back(worker::TorchAdamWBaseline::Create(b.n, t, b.hyper));
  worker::TorchAdamWBaseline* tr = b.torch_runs.back().get();
  b.configs.push_back({"torch::optim::AdamW " + std::to_string(t) + "T", [tr] { tr->Step(); }, 28.0, {}});
  for (optim::SimdLevel level :
       {optim::SimdLevel::kScalar, optim::SimdLevel::kAvx2, optim::SimdLevel::kAvx512}) {
    auto r = optim::CpuAdamW::Create(t, level);
    if (!r.ok()) continue;
    b.runners.push_back(std::move(*r));
    optim::CpuAdamW* runner = b.runners.back().get();
    for (bool bf16 : {false, true}) {
      optim::AdamWSpans s;
      s.param = b.p.as<float>();
      s.m = b.m.as<float>();
      s.v = b.v.as<float>();
      s.n = b.n;
      s.grad = bf16 ? b.g16.data() : b.g32.data();
      s.grad_dtype = bf16 ? core::DType::kBFloat16 : core::DType::kFloat32;
      s.param_out = bf16 ? b.out16.data() : nullptr;
      s.out_dtype = core::DType::kBFloat16;
      const std::string what = bf16 ? "bf16 grad -> bf16 param copy" : "fp32 grad";
      b.configs.push_back(
          {std::string("zerofit ") + optim::SimdLevelName(level) + " " + std::to_string(t) + "T, " + what,
           [runner, s, &b] {
             runner->Step({{s, b.hyper, {}}}, ++b.step, 1.0f);
           },
           28.0,
           {}});
    }
  }
}

// The 8-bit step (bitsandbytes' AdamW8bit, as the offload pipeline runs it: tiles of whole 256-element
// blocks), the scalar oracle and the AVX2 and AVX-512 kernels where the CPU has them, with bf16 gradients and
// a bf16 parameter copy: 16 bytes per element (p 4 + 4, g 2, m and v 1 + 1 each, copy 2; the scales are 1/32
// of that).
void AddAdamW8bitRun(Bench& b, int t, optim::SimdLevel level) {
  auto r = optim::CpuAdamW::Create(t, level);
  if (!r.ok()) return;
  b.runners.push_back(std::move(*r));
  optim::CpuAdamW* runner = b.runners.back().get();
  optim::CpuAdamW::Task task;
  task.spans.param = b.p.as<float>();
  task.spans.n = b.n;
  task.spans.grad = b.g16.data();
  task.spans.grad_dtype = core::DType::kBFloat16;
  task.spans.param_out = b.out16.data();
  task.spans.out_dtype = core::DType::kBFloat16;
  task.q8 = optim::Moments8bit{b.mq.as<uint8_t>(), b.vq.as<uint8_t>(), b.m_absmax.as<float>(),
                               b.v_absmax.as<float>()};
  task.hyper = b.hyper;
  const std::string kernel = optim::SimdLevelName(level);
  b.configs.push_back(
      {"zerofit 8-bit " + kernel + " " + std::to_string(t) + "T, bf16 grad -> bf16 param copy",
       [runner, task, &b] { runner->Step({task}, ++b.step, 1.0f); },
       16.0,
       {}});
}

// One line per configuration: median time, rate against LibTorch's AdamW of the same threads and bandwidth
// against both roofs (which come first for each thread count).
void PrintReport(const Bench& b, int reps) {
  std::printf("cpu_adamw_bench: n = %zu parameters, %d reps, medians; best SIMD on this CPU: %s\n", b.n, reps,
              optim::SimdLevelName(optim::DetectSimdLevel()));
  std::printf("%-50s %9s %10s %8s %9s %9s %9s\n", "configuration", "ms", "Mparam/s", "GB/s", "vs torch",
              "of triad", "of probe");
  double triad_gbs = 0, probe_gbs = 0, torch_rate = 0;
  for (const Config& c : b.configs) {
    const double s = Median(c.seconds);
    const double rate = b.n / s;
    const double gbs = rate * c.bytes_per_param / 1e9;
    if (c.name.rfind("triad", 0) == 0 || c.name.rfind("same-streams", 0) == 0) {
      (c.name[0] == 't' ? triad_gbs : probe_gbs) = gbs;
      std::printf("%-50s %9.2f %10s %8.2f\n", c.name.c_str(), s * 1e3, "-", gbs);
      continue;
    }
    if (c.name.rfind("torch", 0) == 0) torch_rate = rate;
    std::printf("%-50s %9.2f %10.1f %8.2f %8.2fx %8.0f%% %8.0f%%\n", c.name.c_str(), s * 1e3, rate / 1e6, gbs,
                rate / torch_rate, 100.0 * gbs / triad_gbs, 100.0 * gbs / probe_gbs);
  }
  std::printf(
      "bounds: 28 bytes touched per parameter (read param, m, v and a 4-byte fp32 or 2-byte bf16 gradient; "
      "write param, m, v and, for bf16, a 2-byte copy) at the STREAM-triad bandwidth (12 bytes/element) "
      "and at the same-streams probe bandwidth, both measured with the same threads\n");
}

int Main(int argc, char** argv) {
  const std::optional<Flags> flags = ParseFlags(argc, argv);
  if (!flags) return 2;
  if (optim::DetectSimdLevel() == optim::SimdLevel::kScalar) {
    std::fprintf(stderr, "this CPU has no AVX2: the bandwidth probes need it\n");
    return 2;
  }
  Bench b(flags->n);
  for (int t = 1; t <= flags->max_threads; ++t) {
    AddBandwidthProbes(b, t);
    AddAdamWRuns(b, t);
    for (optim::SimdLevel level :
         {optim::SimdLevel::kScalar, optim::SimdLevel::kAvx2, optim::SimdLevel::kAvx512})
      AddAdamW8bitRun(b, t, level);
  }
  for (Config& c : b.configs) c.run();  // warm-up: page faults, torch state allocation
  for (int r = 0; r < flags->reps; ++r) {
    for (Config& c : b.configs) c.seconds.push_back(Seconds(c.run));
  }
  PrintReport(b, flags->reps);
  return 0;
}

}  // namespace
}  // namespace zerofit

int main(int argc, char** argv) { return zerofit::Main(argc, argv); }
