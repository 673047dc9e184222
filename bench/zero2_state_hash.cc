// Runs a fixed ZeRO-2 scenario on the host (MPI ranks) and prints an FNV-1a hash of the final flat
// parameters and shard state per configuration. It uses only the API the engine had before and after the
// device seam, so scripts/compare_engine_hashes.sh can build it against an older commit and compare the two
// builds bit for bit.
#include <mpi.h>

#include <cstdio>
#include <vector>

#include "comm/communicator_factory.h"
#include "comm/mpi/mpi_environment.h"
#include "offload/offload_shard_updater.h"
#include "sharding/zero2_optimizer.h"
using namespace zerofit;
using namespace zerofit::sharding;
static uint64_t Fnv(const void* p, size_t n, uint64_t h) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) {
    h ^= b[i];
    h *= 1099511628211ull;
  }
  return h;
}
static float GradValue(int rank, int step, int micro, size_t param, size_t e) {
  const uint32_t h = static_cast<uint32_t>(rank * 7919 + step * 104729 + micro * 1299709 + param * 15485863 +
                                           e * 2654435761u);
  return (static_cast<float>(h % 2001) - 1000.0f) * 1e-3f;
}
struct Config {
  const char* name;
  AccumulationMode mode;
  core::DType dt;
  bool off;
  bool dpu;
};

constexpr Config kConfigs[] = {
    {"every_fp32", AccumulationMode::kReduceScatterEveryMicroBatch, core::DType::kFloat32, false, false},
    {"every_bf16", AccumulationMode::kReduceScatterEveryMicroBatch, core::DType::kBFloat16, false, false},
    {"once_fp32", AccumulationMode::kReduceOncePerStep, core::DType::kFloat32, false, false},
    {"once_bf16", AccumulationMode::kReduceOncePerStep, core::DType::kBFloat16, false, false},
    {"every_bf16_offload", AccumulationMode::kReduceScatterEveryMicroBatch, core::DType::kBFloat16, true,
     false},
    {"once_fp32_offload", AccumulationMode::kReduceOncePerStep, core::DType::kFloat32, true, false},
    {"every_bf16_offload_dpu", AccumulationMode::kReduceScatterEveryMicroBatch, core::DType::kBFloat16, true,
     true}};

static Zero2Options OptionsFor(const Config& c) {
  Zero2Options o;
  o.param_dtype = c.dt;
  o.bucket_bytes = 256 * core::DTypeSize(c.dt);
  o.max_staging_buffers = 2;
  o.accumulation_mode = c.mode;
  o.adamw.weight_decay = 0.1f;
  o.max_grad_norm = 0.5f;
  o.offload.enabled = c.off;
  o.offload.threads = 2;
  o.offload.delayed_update_from = c.dpu ? 1 : -1;
  return o;
}

// One micro-batch's gradients, last parameter first (as a backward hands them over).
static void RunMicroBatch(Zero2Optimizer& z, const Config& c, const std::vector<ParamSpec>& specs, int rank,
                          int step, int micro) {
  (void)z.BeginMicroBatch(micro == 2);
  std::vector<std::vector<uint8_t>> g(specs.size());
  for (size_t i = specs.size(); i-- > 0;) {
    g[i].resize(specs[i].numel * core::DTypeSize(c.dt));
    for (size_t e = 0; e < specs[i].numel; ++e)
      core::StoreFromFloat(g[i].data(), c.dt, e, GradValue(rank, step, micro, i, e));
    if (c.mode == AccumulationMode::kReduceOncePerStep) {
      for (size_t e = 0; e < specs[i].numel; ++e)
        core::StoreFromFloat(
            z.grad_data(i), c.dt, e,
            core::LoadAsFloat(z.grad_data(i), c.dt, e) + core::LoadAsFloat(g[i].data(), c.dt, e));
      (void)z.OnGradientReady(i, nullptr);
    } else {
      (void)z.OnGradientReady(i, g[i].data());
    }
  }
  (void)z.EndMicroBatch(10.0 + rank);
}

// FNV-1a over the flat parameters, then the master weights and both AdamW moments of this rank's shard.
static uint64_t StateHash(Zero2Optimizer& z, core::DType dt) {
  uint64_t h = 1469598103934665603ull;
  const size_t eb = core::DTypeSize(dt);
  const auto* flat = static_cast<const uint8_t*>(z.param_data(0)) - z.plan().placement(0).flat_offset * eb;
  h = Fnv(flat, z.plan().flat_numel() * eb, h);
  const size_t n = z.plan().shard_numel() * 4;
  h = Fnv(z.master_shard(), n, h);
  h = Fnv(z.exp_avg_shard(), n, h);
  return Fnv(z.exp_avg_sq_shard(), n, h);
}

// Trains configuration `c` for 4 steps of 3 micro-batches and prints its hash; a non-zero exit code on error.
static int RunConfig(const Config& c, const std::vector<ParamSpec>& specs, comm::Communicator* comm) {
  Zero2Devices devices;
  devices.offload_updater = offload::OffloadShardUpdater::Create;
  auto opt = Zero2Optimizer::Create(specs, OptionsFor(c), comm, devices);
  if (!opt.ok()) {
    std::printf("%s\n", opt.status().ToString().c_str());
    return 3;
  }
  Zero2Optimizer& z = **opt;
  for (size_t i = 0; i < specs.size(); ++i)
    for (size_t e = 0; e < specs[i].numel; ++e)
      core::StoreFromFloat(z.param_data(i), c.dt, e, 0.01f * ((e % 13) - 6.0f));
  if (!z.InitializeFromParameters().ok()) return 4;
  const int rank = comm->rank();
  for (int step = 0; step < 4; ++step) {
    for (int micro = 0; micro < 3; ++micro) RunMicroBatch(z, c, specs, rank, step, micro);
    auto r = z.Step(1e-2f / (step + 1));
    if (!r.ok()) {
      std::printf("%s\n", r.status().ToString().c_str());
      return 5;
    }
  }
  if (!z.Flush().ok()) return 6;
  std::printf("rank %d %-24s %016llx\n", rank, c.name, static_cast<unsigned long long>(StateHash(z, c.dt)));
  return 0;
}

int main(int argc, char** argv) {
  auto env = comm::MpiEnvironment::Init(&argc, &argv);
  if (!env.ok()) return 1;
  comm::CommContext ctx;
  ctx.mpi = &**env;
  auto comm = comm::CreateCommunicator(comm::Backend::kMpi, ctx, {});
  if (!comm.ok()) return 2;
  const std::vector<ParamSpec> specs = {
      {"embed", 300, true}, {"norm", 17, false}, {"w1", 513, true}, {"w2", 129, true}, {"head", 64, true}};
  for (const Config& c : kConfigs) {
    if (const int rc = RunConfig(c, specs, comm->get()); rc != 0) return rc;
  }
  return 0;
}
