// zero2_comm_bench: bytes on the wire and step time of ZeRO-2 (both accumulation modes) against plain
// all-reduce data parallelism, on the same Llama-shaped parameter set with synthetic gradients.
//
//   mpiexec --oversubscribe --allow-run-as-root -n W zero2_comm_bench [--hidden 512 --layers 4 --vocab 8192
//       --steps 10 --warmup 2 --micro 4 --bucket-mb 4 --json]
//
// What is measured, per optimizer step of K = --micro micro-batches (each micro-batch fills every gradient
// with a deterministic pseudo-random pattern in backward order, i.e. reverse registration order):
//   zero2-rs-every-micro  Zero2Optimizer, AccumulationMode::kReduceScatterEveryMicroBatch
//   zero2-reduce-once     Zero2Optimizer, AccumulationMode::kReduceOncePerStep (gradients accumulate in place
//                         in grad_data(i); OnGradientReady(i, nullptr))
//   dp-allreduce          written here: a flat fp32 gradient accumulated over K micro-batches, one sum
//                         all-reduce per bucket in the last micro-batch (DDP's no_sync pattern), then
//                         replicated AdamW (optim::CpuAdamWScalar) over all parameters on every rank.
// Bytes are the ring-model bytes a rank sends (comm::CountingCommunicator), split into gradient traffic
// (reduce-scatter / all-reduce of gradients), parameter traffic (all-gather) and ZeRO-2's 16-byte norm
// all-reduce, reported on its own. The DP baseline uses the same BucketPlan (same buckets and padding), so
// the byte comparison is exact. Step time: barrier, then wall clock of the step on each rank, max over ranks.
// The bench's own barrier and max all-reduce go to the uncounted communicator.
//
// Checks (exit status 1 on FAIL): reduce-once gradient bytes == (W-1)/W * gradient bytes == half of the DP
// all-reduce's; and the final parameters of both ZeRO-2 modes match the DP baseline (the unsharded oracle).
// --json replaces the table with one JSON object per line: one per mode, then {"summary":true, checks}.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "comm/communicator_factory.h"
#include "comm/counting_communicator.h"
#include "comm/mpi/mpi_environment.h"
#include "core/status_macros.h"
#include "device/device.h"
#include "optim/cpu_adamw.h"
#include "sharding/bucket_plan.h"
#include "sharding/zero2_optimizer.h"

namespace zerofit::bench {
namespace {

using comm::Buffer;
using comm::CommCounters;
using comm::ReduceOp;
using core::DType;
using sharding::AccumulationMode;
using sharding::ParamSpec;

struct Config {
  int hidden = 512;
  int layers = 4;
  int vocab = 8192;
  int steps = 10;
  int warmup = 2;
  int micro = 4;
  double bucket_mb = 4.0;  // MiB
  bool json = false;
  bool help = false;
  size_t bucket_bytes() const { return static_cast<size_t>(bucket_mb * (1 << 20)); }
  // MLP width: 11/4 * hidden rounded up to a multiple of 64 (Llama uses ~8/3 rounded to 256).
  int intermediate() const { return (11 * hidden / 4 + 63) / 64 * 64; }
};

constexpr char kUsage[] =
    "usage: mpiexec -n W zero2_comm_bench [--hidden N] [--layers N] [--vocab N] [--steps N] [--warmup N]\n"
    "                                     [--micro K] [--bucket-mb MiB] [--json]\n";

// Flags are `--name value` (or `--name=value`); values are positive (--warmup may be 0).
absl::StatusOr<Config> ParseArgs(int argc, char** argv) {
  Config c;
  struct IntFlag {
    const char* name;
    int* dst;
  };
  const IntFlag ints[] = {{"--hidden", &c.hidden}, {"--layers", &c.layers}, {"--vocab", &c.vocab},
                          {"--steps", &c.steps},   {"--warmup", &c.warmup}, {"--micro", &c.micro}};
  for (int a = 1; a < argc; ++a) {
    std::string name = argv[a], value;
    const bool has_value = name.find('=') != std::string::npos;
    if (has_value) {
      value = name.substr(name.find('=') + 1);
      name = name.substr(0, name.find('='));
    }
    if (name == "--json" || name == "--help" || name == "-h") {
      (name == "--json" ? c.json : c.help) = true;
      continue;
    }
    const IntFlag* flag = nullptr;
    for (const IntFlag& f : ints) flag = name == f.name ? &f : flag;
    if (flag == nullptr && name != "--bucket-mb") {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag '", name,
                       "'; known flags: --hidden --layers --vocab --steps --warmup --micro "
                       "--bucket-mb --json --help"));
    }
    if (!has_value) {
      if (a + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat("flag ", name, " needs a value"));
      value = argv[++a];
    }
    if (flag != nullptr) {
      const bool ok = absl::SimpleAtoi(value, flag->dst);
      const bool zero_ok = name == "--warmup";
      if (!ok || *flag->dst < (zero_ok ? 0 : 1)) {
        return absl::InvalidArgumentError(absl::StrCat("flag ", name, " wants a ",
                                                       zero_ok ? "non-negative" : "positive",
                                                       " integer, got '", value, "'"));
      }
    } else if (!absl::SimpleAtod(value, &c.bucket_mb) || !(c.bucket_mb > 0) || c.bucket_mb > 1024) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --bucket-mb wants MiB in (0, 1024], got '", value, "'"));
    }
  }
  return c;
}

// Registration order of a Llama decoder (HF naming); norms and their weight_decay=false as in common recipes.
std::vector<ParamSpec> LlamaParams(const Config& c) {
  const size_t h = c.hidden, inter = c.intermediate(), v = c.vocab;
  std::vector<ParamSpec> p;
  p.push_back({"embed_tokens.weight", v * h, true});
  for (int l = 0; l < c.layers; ++l) {
    const std::string pre = absl::StrCat("layers.", l, ".");
    for (const char* n : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
      p.push_back({absl::StrCat(pre, "self_attn.", n, ".weight"), h * h, true});
    }
    for (const char* n : {"gate_proj", "up_proj", "down_proj"}) {
      p.push_back({absl::StrCat(pre, "mlp.", n, ".weight"), h * inter, true});
    }
    p.push_back({absl::StrCat(pre, "input_layernorm.weight"), h, false});
    p.push_back({absl::StrCat(pre, "post_attention_layernorm.weight"), h, false});
  }
  p.push_back({"norm.weight", h, false});
  p.push_back({"lm_head.weight", v * h, true});
  return p;
}

uint64_t Mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Deterministic pseudo-random values at close to memory speed: a permuted walk through a 4096-entry table
// of values in [-1, 1), with offset, odd stride and scale drawn from `seed`. Immutable after construction,
// so safe to share.
// With scale 1 every value is a multiple of 2^-15 below 1.5 in magnitude (table: multiples of 2^-7, scale
// factor: multiples of 2^-8), so any sum of up to 340 of them is exact in fp32 whatever the order. Gradients
// reduced over K micro-batches and W ranks are therefore bit-identical in every mode (for K * W <= 340), and
// the comparison of final parameters against the DP baseline can be tight instead of fighting cancellation.
class Pattern {
 public:
  Pattern() {
    for (size_t k = 0; k < kSize; ++k) table_[k] = (static_cast<float>(Mix(k) >> 56) - 128.0f) / 128.0f;
  }
  // dst[j] (+)= value(seed, j) for j < n.
  void Fill(uint64_t seed, float* dst, size_t n, bool accumulate, float scale = 1.0f) const {
    const uint64_t r = Mix(seed);
    const size_t offset = r & (kSize - 1), stride = ((r >> 16) & (kSize - 1)) | 1;
    const float s = scale * (0.5f + static_cast<float>((r >> 32) & 0xff) / 256.0f);
    size_t idx = offset;
    for (size_t j = 0; j < n; ++j, idx = (idx + stride) & (kSize - 1)) {
      dst[j] = (accumulate ? dst[j] : 0.0f) + s * table_[idx];
    }
  }

 private:
  static constexpr size_t kSize = 4096;
  float table_[kSize];
};

uint64_t GradSeed(int rank, int step, int micro, size_t param) {
  return Mix(Mix(Mix(static_cast<uint64_t>(rank) + 1) ^ static_cast<uint64_t>(step)) ^ (micro * 1000003ull)) ^
         param;
}

// Initial parameters, identical on every rank: small weights, norms at 1.
void InitParam(const Pattern& pattern, const ParamSpec& spec, size_t i, float* dst) {
  if (!spec.weight_decay) {
    std::fill(dst, dst + spec.numel, 1.0f);
  } else {
    pattern.Fill(Mix(0xabcdefull + i), dst, spec.numel, false, 0.02f);
  }
}

struct Context {
  const Config& cfg;
  const std::vector<ParamSpec>& params;
  const Pattern& pattern;
  comm::Communicator* inner;            // uncounted: the bench's own barriers and timing reductions
  comm::CountingCommunicator* counted;  // what the optimizers use
  sharding::Zero2Options zero2;         // shared hyper-parameters; accumulation is set per mode
};

struct ModeResult {
  std::string mode;
  double grad_bytes = 0, param_bytes = 0, norm_bytes = 0;  // ring-model bytes sent per rank per step
  double rs_calls = 0, ag_calls = 0, ar_calls = 0;         // per step
  std::vector<double> step_ms;                             // max over ranks, one per timed step
  size_t opt_state_bytes = 0;                              // per rank
  double max_abs_diff = 0;                                 // final parameters vs the DP baseline
  // Gradient memory per rank. ZeRO-2: staging (or flat gradient) + fp32 shard + landing buffer; DP: flat.
  size_t grad_buffer_bytes = 0;
  size_t staging_buffers = 0;  // ZeRO-2 rs-every-micro: bucket staging buffers allocated
  double median_ms() const {
    std::vector<double> s = step_ms;
    std::sort(s.begin(), s.end());
    const size_t n = s.size();
    return n == 0 ? 0.0 : (n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]));
  }
  double min_ms() const { return step_ms.empty() ? 0.0 : *std::min_element(step_ms.begin(), step_ms.end()); }
};

absl::Status Check(bool ok, const std::string& what) {
  return ok ? absl::OkStatus() : absl::InternalError(what);
}

// Runs warm-up + timed steps of `step` (whose argument is the global step index), timing the timed ones
// and resetting the counters once warm-up is over.
absl::Status RunSteps(Context& ctx, ModeResult& r, const std::function<absl::Status(int)>& step) {
  const absl::Duration timeout = ctx.inner->options().timeout;
  for (int s = 0; s < ctx.cfg.warmup + ctx.cfg.steps; ++s) {
    if (s == ctx.cfg.warmup) ctx.counted->ResetCounters();
    ZF_RETURN_IF_ERROR(ctx.inner->Barrier(timeout));
    const absl::Time t0 = absl::Now();
    ZF_RETURN_IF_ERROR(step(s));
    double ms = absl::ToDoubleMilliseconds(absl::Now() - t0);
    ZF_RETURN_IF_ERROR(
        comm::WaitFor(ctx.inner->AllReduce(Buffer{&ms, 1, DType::kFloat64}, ReduceOp::kMax), timeout));
    if (s >= ctx.cfg.warmup) r.step_ms.push_back(ms);
  }
  const CommCounters c = ctx.counted->counters();
  const double n = ctx.cfg.steps;
  r.rs_calls = c.calls[CommCounters::kReduceScatter] / n;
  r.ag_calls = c.calls[CommCounters::kAllGather] / n;
  r.ar_calls = c.calls[CommCounters::kAllReduce] / n;
  r.param_bytes = c.sent_bytes[CommCounters::kAllGather] / n;
  return Check(c.calls[CommCounters::kBroadcast] == 0, "unexpected broadcast during timed steps");
}

// The bucket layout Zero2Optimizer builds for `ctx.zero2` (fp32), reused by the DP baseline and the checks.
absl::StatusOr<sharding::BucketPlan> MakePlan(const Context& ctx) {
  sharding::BucketPlanOptions po;
  po.bucket_bytes = ctx.zero2.bucket_bytes;
  po.element_bytes = sizeof(float);
  po.alignment = ctx.zero2.alignment_bytes / sizeof(float);
  po.world = ctx.inner->world_size();
  po.rank = ctx.inner->rank();
  return sharding::BucketPlan::Make(ctx.params, po);
}

// Max over ranks of max |params(i) - reference| (reference: the DP baseline's final parameters, in
// registration order, unpadded).
absl::StatusOr<double> MaxDiff(Context& ctx, const std::function<const float*(size_t)>& param,
                               const std::vector<float>& reference) {
  double diff = 0;
  size_t at = 0;
  for (size_t i = 0; i < ctx.params.size(); ++i) {
    const float* p = param(i);
    for (size_t j = 0; j < ctx.params[i].numel; ++j, ++at) {
      diff = std::max(diff, static_cast<double>(std::fabs(p[j] - reference[at])));
    }
  }
  ZF_RETURN_IF_ERROR(comm::WaitFor(ctx.inner->AllReduce(Buffer{&diff, 1, DType::kFloat64}, ReduceOp::kMax),
                                   ctx.inner->options().timeout));
  return diff;
}

absl::StatusOr<ModeResult> RunZero2(Context& ctx, AccumulationMode mode,
                                    const std::vector<float>& reference) {
  ModeResult r;
  r.mode = mode == AccumulationMode::kReduceOncePerStep ? "zero2-reduce-once" : "zero2-rs-every-micro";
  sharding::Zero2Options o = ctx.zero2;
  o.accumulation_mode = mode;
  ZF_ASSIGN_OR_RETURN(auto opt, sharding::Zero2Optimizer::Create(ctx.params, o, ctx.counted));
  size_t max_numel = 0;
  for (size_t i = 0; i < ctx.params.size(); ++i) {
    InitParam(ctx.pattern, ctx.params[i], i, static_cast<float*>(opt->param_data(i)));
    max_numel = std::max(max_numel, ctx.params[i].numel);
  }
  ZF_RETURN_IF_ERROR(opt->InitializeFromParameters(/*broadcast=*/true));
  std::vector<float> scratch(mode == AccumulationMode::kReduceOncePerStep ? 0
                                                                          : max_numel);  // "autograd output"
  const int rank = ctx.inner->rank(), K = ctx.cfg.micro;
  ZF_RETURN_IF_ERROR(RunSteps(ctx, r, [&](int s) -> absl::Status {
    for (int k = 0; k < K; ++k) {
      ZF_RETURN_IF_ERROR(opt->BeginMicroBatch(/*last_of_step=*/k == K - 1));
      for (size_t i = ctx.params.size(); i-- > 0;) {
        const uint64_t seed = GradSeed(rank, s, k, i);
        if (mode == AccumulationMode::kReduceOncePerStep) {
          ctx.pattern.Fill(seed, static_cast<float*>(opt->grad_data(i)), ctx.params[i].numel, true);
          ZF_RETURN_IF_ERROR(opt->OnGradientReady(i, nullptr));
        } else {
          ctx.pattern.Fill(seed, scratch.data(), ctx.params[i].numel, false);
          ZF_RETURN_IF_ERROR(opt->OnGradientReady(i, scratch.data()));
        }
      }
      ZF_RETURN_IF_ERROR(opt->EndMicroBatch(/*units=*/1.0));
    }
    ZF_ASSIGN_OR_RETURN(sharding::StepResult res, opt->Step(1e-3f));
    return Check(res.applied, absl::StrCat(r.mode, ": step ", s, " was skipped (non-finite gradient norm)"));
  }));
  const CommCounters c = ctx.counted->counters();
  r.grad_bytes = c.sent_bytes[CommCounters::kReduceScatter] / ctx.cfg.steps;
  r.norm_bytes = c.sent_bytes[CommCounters::kAllReduce] / ctx.cfg.steps;
  // ZeRO-2's only all-reduce must be the {sum of squares, units} pair of doubles, or the split above lies.
  ZF_RETURN_IF_ERROR(
      Check(c.payload_bytes[CommCounters::kAllReduce] == 16ull * ctx.cfg.steps,
            absl::StrCat(r.mode, ": all-reduce payload ", c.payload_bytes[CommCounters::kAllReduce],
                         " bytes is not one 16-byte norm reduction per step")));
  const sharding::Zero2MemoryStats mem = opt->memory();
  r.opt_state_bytes = mem.optimizer_state_bytes();
  r.grad_buffer_bytes = mem.staging_bytes_peak + mem.flat_grad_bytes + mem.shard_grad_bytes + mem.recv_bytes;
  r.staging_buffers = mem.staging_bytes_peak / (opt->plan().max_bucket_numel() * sizeof(float));
  ZF_ASSIGN_OR_RETURN(
      r.max_abs_diff,
      MaxDiff(
          ctx, [&](size_t i) { return static_cast<const float*>(opt->param_data(i)); }, reference));
  return r;
}

// Unsharded data parallelism over the same BucketPlan; fills `final_params` (registration order, unpadded).
absl::StatusOr<ModeResult> RunDataParallel(Context& ctx, std::vector<float>& final_params) {
  ModeResult r;
  r.mode = "dp-allreduce";
  const comm::Communicator& cc = *ctx.counted;
  ZF_ASSIGN_OR_RETURN(sharding::BucketPlan plan, MakePlan(ctx));
  const size_t flat = plan.flat_numel() * sizeof(float);
  ZF_ASSIGN_OR_RETURN(device::Buffer params, device::AllocateHostMemory(flat, device::MemoryKind::kPageable));
  ZF_ASSIGN_OR_RETURN(device::Buffer grads, device::AllocateHostMemory(flat, device::MemoryKind::kPageable));
  ZF_ASSIGN_OR_RETURN(device::Buffer master, device::AllocateHostMemory(flat, device::MemoryKind::kPageable));
  ZF_ASSIGN_OR_RETURN(device::Buffer m, device::AllocateHostMemory(flat, device::MemoryKind::kPageable));
  ZF_ASSIGN_OR_RETURN(device::Buffer v, device::AllocateHostMemory(flat, device::MemoryKind::kPageable));
  auto at = [&plan](device::Buffer& b, size_t i) { return b.as<float>() + plan.placement(i).flat_offset; };
  for (size_t i = 0; i < ctx.params.size(); ++i) {
    InitParam(ctx.pattern, ctx.params[i], i, at(params, i));
    std::memcpy(at(master, i), at(params, i), ctx.params[i].numel * sizeof(float));
  }
  r.opt_state_bytes = 12 * plan.numel();  // fp32 master + m + v for every parameter, on every rank
  r.grad_buffer_bytes = flat;
  const int rank = cc.rank(), world = cc.world_size(), K = ctx.cfg.micro;
  const absl::Duration timeout = cc.options().timeout;
  int64_t adam_step = 0;
  ZF_RETURN_IF_ERROR(RunSteps(ctx, r, [&](int s) -> absl::Status {
    std::vector<std::unique_ptr<comm::Work>> works;
    for (int k = 0; k < K; ++k) {
      for (size_t i = ctx.params.size(); i-- > 0;) {
        ctx.pattern.Fill(GradSeed(rank, s, k, i), at(grads, i), ctx.params[i].numel, true);
        const sharding::Bucket& b = plan.buckets()[plan.placement(i).bucket];
        if (k == K - 1 && b.params.back() == i) {  // bucket complete in the syncing micro-batch: reduce it
          Buffer buf{grads.as<float>() + b.flat_offset, b.layout.padded_numel, DType::kFloat32};
          ZF_ASSIGN_OR_RETURN(auto w, ctx.counted->AllReduce(buf, ReduceOp::kSum));
          works.push_back(std::move(w));
        }
      }
    }
    for (auto& w : works) ZF_RETURN_IF_ERROR(w->Wait(timeout));
    // Same normalisation and clipping arithmetic as Zero2Optimizer::Step, on the full gradient.
    const float* g = grads.as<float>();
    double sumsq = 0;
    for (size_t e = 0; e < plan.flat_numel(); ++e) sumsq += static_cast<double>(g[e]) * g[e];
    const double denom = static_cast<double>(K) * world;
    const double norm = std::sqrt(sumsq) / denom;
    const double max_norm = ctx.zero2.max_grad_norm;
    const double clip = max_norm > 0 ? std::min(1.0, max_norm / (norm + 1e-6)) : 1.0;
    const float grad_scale = static_cast<float>(clip / denom);
    ++adam_step;
    for (size_t i = 0; i < ctx.params.size(); ++i) {
      optim::AdamWHyper h = optim::StepHyper(ctx.zero2.adamw, 1e-3f);
      if (!ctx.params[i].weight_decay) h.weight_decay = 0.0f;
      optim::CpuAdamWScalar(at(master, i), at(grads, i), at(m, i), at(v, i), ctx.params[i].numel, h,
                            adam_step, grad_scale, at(params, i), DType::kFloat32);
    }
    std::memset(grads.data(), 0, grads.bytes());
    return absl::OkStatus();
  }));
  const CommCounters c = ctx.counted->counters();
  r.grad_bytes = c.sent_bytes[CommCounters::kAllReduce] / ctx.cfg.steps;
  final_params.clear();
  final_params.reserve(plan.numel());
  for (size_t i = 0; i < ctx.params.size(); ++i) {
    final_params.insert(final_params.end(), at(params, i), at(params, i) + ctx.params[i].numel);
  }
  return r;
}

std::string Json(const ModeResult& r, const Config& cfg, int world, size_t numel, double dp_grad_bytes) {
  return absl::StrFormat(
      "{\"mode\":\"%s\",\"world\":%d,\"params\":%d,\"micro\":%d,\"steps\":%d,\"grad_bytes_per_step\":%.3f,"
      "\"param_bytes_per_step\":%.3f,\"total_bytes_per_step\":%.3f,\"norm_allreduce_bytes_per_step\":%.3f,"
      "\"grad_ratio_vs_dp\":%.6f,\"reduce_scatter_calls_per_step\":%.2f,\"all_gather_calls_per_step\":%.2f,"
      "\"all_reduce_calls_per_step\":%.2f,\"step_ms_median\":%.3f,\"step_ms_min\":%.3f,"
      "\"optimizer_state_bytes_per_rank\":%d,\"grad_buffer_bytes_per_rank\":%d,\"staging_buffers\":%d,"
      "\"max_abs_param_diff_vs_dp\":%.3g}",
      r.mode, world, numel, cfg.micro, cfg.steps, r.grad_bytes, r.param_bytes, r.grad_bytes + r.param_bytes,
      r.norm_bytes, dp_grad_bytes > 0 ? r.grad_bytes / dp_grad_bytes : 0.0, r.rs_calls, r.ag_calls,
      r.ar_calls, r.median_ms(), r.min_ms(), r.opt_state_bytes, r.grad_buffer_bytes, r.staging_buffers,
      r.max_abs_diff);
}

bool Near(double a, double b) {
  return std::fabs(a - b) <= 1e-9 * std::max({1.0, std::fabs(a), std::fabs(b)});
}

absl::StatusOr<int> Run(const Config& cfg, const comm::MpiEnvironment& env) {
  const comm::Backend backend = env.world_size() == 1 ? comm::Backend::kLocal : comm::Backend::kMpi;
  comm::CommContext cc;
  cc.mpi = &env;
  ZF_ASSIGN_OR_RETURN(auto inner, comm::CreateCommunicator(backend, cc));
  comm::CountingCommunicator counted(inner.get());
  const std::vector<ParamSpec> params = LlamaParams(cfg);
  const Pattern pattern;
  Context ctx{cfg, params, pattern, inner.get(), &counted, {}};
  ctx.zero2.bucket_bytes = cfg.bucket_bytes();
  ctx.zero2.max_grad_norm = 1.0f;  // exercises the global-norm path; our synthetic gradients are clipped
  const int world = inner->world_size(), rank = inner->rank();

  std::vector<float> reference;
  std::vector<ModeResult> results;
  ZF_ASSIGN_OR_RETURN(ModeResult dp, RunDataParallel(ctx, reference));
  for (AccumulationMode mode :
       {AccumulationMode::kReduceScatterEveryMicroBatch, AccumulationMode::kReduceOncePerStep}) {
    ZF_ASSIGN_OR_RETURN(ModeResult z, RunZero2(ctx, mode, reference));
    results.push_back(std::move(z));
  }
  results.push_back(std::move(dp));
  const ModeResult &every = results[0], &once = results[1], &base = results[2];

  // The claim: with one reduce-scatter per step, ZeRO-2 sends (W-1)/W of the gradient, half of what the
  // ring all-reduce sends (2(W-1)/W), and K times less than reduce-scattering every micro-batch.
  ZF_ASSIGN_OR_RETURN(sharding::BucketPlan plan, MakePlan(ctx));
  const double grad_size = static_cast<double>(plan.flat_numel()) * sizeof(float);
  const double expect_once = (world - 1.0) / world * grad_size;
  const bool bytes_ok = Near(once.grad_bytes, expect_once) && Near(once.grad_bytes, 0.5 * base.grad_bytes) &&
                        Near(every.grad_bytes, cfg.micro * once.grad_bytes) &&
                        Near(once.param_bytes, expect_once) && Near(every.param_bytes, expect_once);
  // ZeRO-2 must reproduce unsharded training. The reduced gradients are exact (see Pattern); only the
  // double-precision sum of squares is ordered differently, which can move the clip factor by one float ulp.
  // A wrong shard, bucket or scale shows up as differences of order lr (1e-3).
  constexpr double kTolerance = 1e-6;
  const bool numerics_ok = every.max_abs_diff <= kTolerance && once.max_abs_diff <= kTolerance;

  if (rank == 0 && cfg.json) {
    for (const ModeResult& r : results)
      std::printf("%s\n", Json(r, cfg, world, plan.numel(), base.grad_bytes).c_str());
    std::printf("{\"summary\":true,\"bytes_check\":\"%s\",\"numerics_check\":\"%s\"}\n",
                bytes_ok ? "PASS" : "FAIL", numerics_ok ? "PASS" : "FAIL");
  } else if (rank == 0) {
    constexpr double kMiB = 1 << 20;
    std::printf("zero2_comm_bench: W=%d (%s), Llama-like hidden=%d layers=%d vocab=%d intermediate=%d\n",
                world, inner->backend_name().c_str(), cfg.hidden, cfg.layers, cfg.vocab, cfg.intermediate());
    std::printf(
        "  params: %zu in %zu tensors (%.2f MiB fp32); %zu buckets of <= %g MiB, padding %zu elements\n",
        plan.numel(), params.size(), plan.numel() * 4 / kMiB, plan.buckets().size(), cfg.bucket_mb,
        plan.flat_numel() - plan.numel());
    std::printf(
        "  K=%d micro-batches per step, %d timed steps after %d warm-up; bytes: ring-model bytes sent per "
        "rank per step (MiB = 2^20 B); ms: max over ranks\n\n",
        cfg.micro, cfg.steps, cfg.warmup);
    std::printf("%-22s %10s %10s %10s %8s %6s %6s %6s %10s %9s %13s\n", "mode", "grad MiB", "param MiB",
                "total MiB", "grad/DP", "RS", "AG", "AR", "median ms", "min ms", "opt MiB/rank");
    for (const ModeResult& r : results) {
      std::printf("%-22s %10.2f %10.2f %10.2f %8.3f %6.1f %6.1f %6.1f %10.1f %9.1f %13.2f\n", r.mode.c_str(),
                  r.grad_bytes / kMiB, r.param_bytes / kMiB, (r.grad_bytes + r.param_bytes) / kMiB,
                  base.grad_bytes > 0 ? r.grad_bytes / base.grad_bytes : 0.0, r.rs_calls, r.ag_calls,
                  r.ar_calls, r.median_ms(), r.min_ms(), r.opt_state_bytes / kMiB);
    }
    std::printf("\nnorm all-reduce (ZeRO-2 only, not in the columns above): %.1f bytes/step\n",
                once.norm_bytes);
    for (const ModeResult& r : results) {
      std::printf("%-22s gradient buffers %.2f MiB/rank", r.mode.c_str(), r.grad_buffer_bytes / kMiB);
      std::printf(&r == &every ? ", %zu bucket staging buffer(s)\n" : "\n", r.staging_buffers);
    }
    std::printf(
        "check: reduce-once grad bytes %.0f == (W-1)/W * %.0f = %.0f == DP all-reduce %.0f / 2, "
        "rs-every-micro == K * reduce-once, all-gather == (W-1)/W * params: %s\n",
        once.grad_bytes, grad_size, expect_once, base.grad_bytes, bytes_ok ? "PASS" : "FAIL");
    std::printf(
        "check: final parameters vs DP baseline, max |diff| rs-every-micro %.3g, reduce-once %.3g "
        "(tolerance %.0e): %s\n",
        every.max_abs_diff, once.max_abs_diff, kTolerance, numerics_ok ? "PASS" : "FAIL");
  }
  return bytes_ok && numerics_ok ? 0 : 1;
}

}  // namespace
}  // namespace zerofit::bench

int main(int argc, char** argv) {
  using namespace zerofit;
  auto env = comm::MpiEnvironment::Init(&argc, &argv);
  if (!env.ok()) {
    std::fprintf(stderr, "zero2_comm_bench: %s\n", env.status().ToString().c_str());
    return 2;
  }
  const bool root = (*env)->world_rank() == 0;
  absl::StatusOr<bench::Config> cfg = bench::ParseArgs(argc, argv);
  if (!cfg.ok() || cfg->help) {  // every rank parses the same argv, so all leave here together
    if (root && !cfg.ok())
      std::fprintf(stderr, "zero2_comm_bench: %s\n", std::string(cfg.status().message()).c_str());
    if (root) std::fprintf(cfg.ok() ? stdout : stderr, "%s", bench::kUsage);
    return cfg.ok() ? 0 : 2;
  }
  absl::StatusOr<int> rc = bench::Run(*cfg, **env);
  if (!rc.ok()) {
    std::fprintf(stderr, "zero2_comm_bench: rank %d: %s\n", (*env)->world_rank(),
                 rc.status().ToString().c_str());
    if ((*env)->world_size() > 1) (*env)->AbortJob(1);  // peers may be blocked in a collective
    return 1;
  }
  return *rc;
}
