// zerofit's fused CPU AdamW vs DeepSpeed's cpu_adam, side by side in one process, on the ZeRO-Offload update
// of a bf16 model with fp32 master weights:
//   zerofit:   optim::CpuAdamW, bf16 gradient in, fp32 master/m/v updated, bf16 parameter copy out, one
//   pass. DeepSpeed: Adam_Optimizer::Step_AVX<8> (the hot loop of ds_adam_step / Step_8) on fp32 master, fp32
//              gradient, fp32 m/v, then a separate fp32 -> bf16 cast pass of the master weights (DeepSpeed's
//              own SIMD_STORE_BF16, OpenMP). It stands in for the CPU pass of DeepSpeed's ZeRO-1/2 offload,
//              bit16_partition_buffer.data.copy_(fp32_partition.data) in stage_1_and_2.py, which produces the
//              bf16 model copy before the host-to-device copy.
// Same values, same sizes, same thread counts. DeepSpeed is handed its gradient already widened to fp32 (the
// widening is not timed), which favours DeepSpeed.
//
//   deepspeed_cpu_adam_bench [--sizes 16777216,67108864] [--threads 1,2] [--reps 7]
//
// Configurations run round-robin `reps` times after one warm-up pass (so drift hits all alike), with a short
// sleep before each run so that OpenMP's spinning workers are idle when the next configuration starts. Built
// and run by bench/deepspeed_cpu_adam_bench.sh DEEPSPEED_SRC.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/deepspeed_cpu_adam/deepspeed_step.h"
#include "core/dtype.h"
#include "device/device.h"
#include "optim/cpu_adamw.h"

namespace zerofit::bench {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t k = v.size() / 2;
  return v.size() % 2 == 1 ? v[k] : 0.5 * (v[k - 1] + v[k]);
}

std::vector<size_t> ParseList(const std::string& s) {
  std::vector<size_t> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t comma = std::min(s.find(',', pos), s.size());
    out.push_back(std::strtoull(s.substr(pos, comma - pos).c_str(), nullptr, 10));
    pos = comma + 1;
  }
  return out;
}

device::Buffer Alloc(size_t bytes) {
  auto b = device::AllocateHostMemory(bytes, device::MemoryKind::kPageable);
  if (!b.ok()) {
    std::fprintf(stderr, "allocating %zu bytes: %s\n", bytes, b.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(*b);
}

struct Config {
  std::string name;
  std::function<bool()> run;  // false: the kernel refused its arguments
  std::vector<double> seconds;
};

// One optimizer state per side, initialised to the same values.
struct Side {
  device::Buffer param, m, v, grad, out;
};

struct Flags {
  std::vector<size_t> sizes = {size_t{1} << 24, size_t{1} << 26};
  std::vector<size_t> thread_counts = {1, 2};
  int reps = 7;
};

// Whether every size is a positive multiple of DeepSpeed's granule, every thread count in [1, 256] and reps
// positive; prints the first that is not.
bool ValidFlags(const Flags& f) {
  const size_t granule = DeepSpeedStepGranule();
  for (size_t n : f.sizes) {
    if (n == 0 || n % granule != 0) {
      std::fprintf(stderr,
                   "--sizes: %zu is not a positive multiple of %zu (DeepSpeed's Step_AVX<8> granule)\n", n,
                   granule);
      return false;
    }
  }
  for (size_t t : f.thread_counts) {
    if (t < 1 || t > 256) {
      std::fprintf(stderr, "--threads: %zu is not in [1, 256]\n", t);
      return false;
    }
  }
  if (f.reps < 1) std::fprintf(stderr, "--reps must be positive\n");
  return f.reps >= 1;
}

std::optional<Flags> ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--sizes" && i + 1 < argc) {
      f.sizes = ParseList(argv[++i]);
    } else if (a == "--threads" && i + 1 < argc) {
      f.thread_counts = ParseList(argv[++i]);
    } else if (a == "--reps" && i + 1 < argc) {
      f.reps = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "unknown flag '%s'; flags: --sizes N[,N...] --threads T[,T...] --reps R\n",
                   a.c_str());
      return std::nullopt;
    }
  }
  if (!ValidFlags(f)) return std::nullopt;
  return f;
}

// Both sides' states for n elements, the same values on each (DeepSpeed's gradient widened to fp32), the
// step counters the timed closures advance, and zerofit's view of its side.
struct SizeRun {
  explicit SizeRun(size_t n_)
      : n(n_),
        ds{Alloc(n * 4), Alloc(n * 4), Alloc(n * 4), Alloc(n * 4), Alloc(n * 2)},
        zf{Alloc(n * 4), Alloc(n * 4), Alloc(n * 4), Alloc(n * 2), Alloc(n * 2)} {
    std::mt19937 rng(1);
    std::normal_distribution<float> normal;
    for (size_t i = 0; i < n; ++i) {
      const float p = normal(rng), m = 1e-3f * normal(rng), g = 1e-2f * normal(rng);
      const float v = 1e-6f * std::fabs(normal(rng));
      const uint16_t g16 = core::FloatToBf16(g);
      ds.param.as<float>()[i] = zf.param.as<float>()[i] = p;
      ds.m.as<float>()[i] = zf.m.as<float>()[i] = m;
      ds.v.as<float>()[i] = zf.v.as<float>()[i] = v;
      ds.grad.as<float>()[i] = core::Bf16ToFloat(g16);  // the same gradient values on both sides
      zf.grad.as<uint16_t>()[i] = g16;
    }
    spans.param = zf.param.as<float>();
    spans.grad = zf.grad.data();
    spans.grad_dtype = core::DType::kBFloat16;
    spans.m = zf.m.as<float>();
    spans.v = zf.v.as<float>();
    spans.n = n;
    spans.param_out = zf.out.data();
    spans.out_dtype = core::DType::kBFloat16;
  }

  size_t n;
  Side ds, zf;
  optim::AdamWSpans spans;
  int64_t ds_step = 1, zf_step = 1;
};

// Agreement check: one step from identical states. The two implement the same AdamW with a different
// operation order (DeepSpeed: v * (1/sqrt(bc2)) via an FMA with eps, bias corrections in float), so the fp32
// results differ in the last bits; a larger difference would mean the bench compares different work.
bool SameUpdate(SizeRun& run, optim::CpuAdamW& runner, const optim::AdamWHyper& zh, const DeepSpeedHyper& dh,
                int threads) {
  const size_t n = run.n;
  Side& ds = run.ds;
  if (!DeepSpeedAdamStep(ds.param.as<float>(), ds.grad.as<float>(), ds.m.as<float>(), ds.v.as<float>(), n, dh,
                         1, threads) ||
      !DeepSpeedCastToBf16(ds.param.as<float>(), ds.out.as<uint16_t>(), n, threads)) {
    std::fprintf(stderr, "DeepSpeed's kernels refused n = %zu (the bf16 cast needs its AVX512 build)\n", n);
    return false;
  }
  runner.Step({{run.spans, zh, {}}}, 1, 1.0f);
  double max_diff = 0;
  size_t bf16_diff = 0;
  for (size_t i = 0; i < n; ++i) {
    const float a = ds.param.as<float>()[i], b = run.zf.param.as<float>()[i];
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(a) - b));
    bf16_diff += ds.out.as<uint16_t>()[i] != run.zf.out.as<uint16_t>()[i];
  }
  // The first step moves every parameter by ~lr (1e-3); fp32 rounding differences are ~1e-7 of |param|.
  std::printf(
      "n = %zu: one step from identical states: max |fp32 master difference| %.2e (step size %.0e), "
      "%zu of %zu bf16 copies differ\n",
      n, max_diff, static_cast<double>(zh.lr), bf16_diff, n);
  if (max_diff > 1e-5) std::fprintf(stderr, "the two kernels disagree: not the same update\n");
  return max_diff <= 1e-5;
}

// Per thread count: DeepSpeed's step, its step and bf16 cast, and zerofit's fused step (in that order).
std::vector<Config> MakeConfigs(SizeRun& run, const std::vector<size_t>& thread_counts,
                                const std::vector<std::unique_ptr<optim::CpuAdamW>>& runners,
                                const optim::AdamWHyper& zh, const DeepSpeedHyper& dh) {
  std::vector<Config> configs;
  Side& ds = run.ds;
  const size_t n = run.n;
  for (size_t ti = 0; ti < thread_counts.size(); ++ti) {
    const int t = static_cast<int>(thread_counts[ti]);
    optim::CpuAdamW* runner = runners[ti].get();
    const std::string suffix = " " + std::to_string(t) + "T";
    auto ds_step = [&ds, &run, n, dh, t] {
      return DeepSpeedAdamStep(ds.param.as<float>(), ds.grad.as<float>(), ds.m.as<float>(), ds.v.as<float>(),
                               n, dh, ++run.ds_step, t);
    };
    configs.push_back({"deepspeed step (fp32 grad)" + suffix, ds_step, {}});
    configs.push_back({"deepspeed step + bf16 cast" + suffix,
                       [&ds, n, t, ds_step] {
                         return ds_step() &&
                                DeepSpeedCastToBf16(ds.param.as<float>(), ds.out.as<uint16_t>(), n, t);
                       },
                       {}});
    configs.push_back({"zerofit fused (bf16 grad -> bf16 copy)" + suffix,
                       [&run, runner, zh] {
                         runner->Step({{run.spans, zh, {}}}, ++run.zf_step, 1.0f);
                         return true;
                       },
                       {}});
  }
  return configs;
}

// One warm-up pass, then `reps` round-robin passes, each run after a 20 ms sleep; false if a kernel refused.
bool TimeConfigs(std::vector<Config>& configs, int reps) {
  for (auto& c : configs) c.run();
  for (int r = 0; r < reps; ++r) {
    for (auto& c : configs) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      const auto t0 = std::chrono::steady_clock::now();
      if (!c.run()) {
        std::fprintf(stderr, "%s refused its arguments\n", c.name.c_str());
        return false;
      }
      c.seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  return true;
}

void PrintConfigs(size_t n, const std::vector<Config>& configs) {
  std::printf("\nn = %zu elements (%.0f MiB per fp32 array)\n", n, n * 4.0 / (1 << 20));
  std::printf("%-46s %9s %10s  %s\n", "configuration", "median ms", "Mparam/s", "runs (ms)");
  for (const auto& c : configs) {
    const double med = Median(c.seconds);
    std::printf("%-46s %9.2f %10.1f  ", c.name.c_str(), med * 1e3, n / med / 1e6);
    for (double s : c.seconds) std::printf(" %.2f", s * 1e3);
    std::printf("\n");
  }
}

struct Summary {
  size_t n, threads;
  double ds_step, ds_total, zf;
};

// One size: the agreement check, then the timed configurations; appends their medians to `summary`.
bool RunSize(size_t n, const Flags& f, optim::SimdLevel level, std::vector<Summary>& summary) {
  const optim::AdamWHyper zh;  // lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay 1e-2 (both sides)
  const DeepSpeedHyper dh{zh.lr, zh.beta1, zh.beta2, zh.eps, zh.weight_decay};
  SizeRun run(n);
  std::vector<std::unique_ptr<optim::CpuAdamW>> runners;
  for (size_t t : f.thread_counts) {
    auto r = optim::CpuAdamW::Create(static_cast<int>(t), level);
    if (!r.ok()) {
      std::fprintf(stderr, "CpuAdamW::Create: %s\n", r.status().ToString().c_str());
      return false;
    }
    runners.push_back(std::move(*r));
  }
  if (!SameUpdate(run, *runners[0], zh, dh, static_cast<int>(f.thread_counts[0]))) return false;
  std::vector<Config> configs = MakeConfigs(run, f.thread_counts, runners, zh, dh);
  if (!TimeConfigs(configs, f.reps)) return false;
  PrintConfigs(n, configs);
  for (size_t ti = 0; ti < f.thread_counts.size(); ++ti) {
    summary.push_back(Summary{n, f.thread_counts[ti], Median(configs[3 * ti].seconds),
                              Median(configs[3 * ti + 1].seconds), Median(configs[3 * ti + 2].seconds)});
  }
  return true;
}

int Main(int argc, char** argv) {
  const std::optional<Flags> flags = ParseFlags(argc, argv);
  if (!flags) return 2;
  const optim::SimdLevel level = optim::DetectSimdLevel();
  std::printf(
      "deepspeed_cpu_adam_bench: %d reps per configuration, round-robin; zerofit kernel %s, DeepSpeed %s\n",
      flags->reps, optim::SimdLevelName(level), DeepSpeedSimdName());
  std::vector<Summary> summary;
  for (size_t n : flags->sizes) {
    if (!RunSize(n, *flags, level, summary)) return 1;
  }
  std::printf("\nspeed ratio = DeepSpeed median time / zerofit median time (> 1: zerofit faster)\n");
  std::printf("%12s %8s %24s %22s\n", "n", "threads", "vs DeepSpeed step+cast", "vs DeepSpeed step only");
  for (const Summary& s : summary) {
    std::printf("%12zu %8zu %23.3fx %21.3fx\n", s.n, s.threads, s.ds_total / s.zf, s.ds_step / s.zf);
  }
  return 0;
}

}  // namespace
}  // namespace zerofit::bench

int main(int argc, char** argv) { return zerofit::bench::Main(argc, argv); }
