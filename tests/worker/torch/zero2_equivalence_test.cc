// ZeRO-2 on W MPI ranks (run at W = 1..4) must train exactly like single-process torch::optim::AdamW on the
// same global batch: 20 steps of a small transformer, accumulation 1 and 4, both accumulation modes, two
// bucket sizes, uneven micro-batches (loss normalisation), gradient clipping on.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "comm/communicator_factory.h"
#include "tests/support/mpi_test_env.h"
#include "worker/torch/model/tiny_transformer.h"
#include "worker/torch/train/zero2_binding.h"

namespace zerofit::worker {
namespace {

using sharding::AccumulationMode;

constexpr int64_t kVocab = 48, kDim = 32, kLayers = 2, kSeq = 9;
constexpr int kSteps = 20, kGlobalBatch = 24;
constexpr float kLr = 3e-3f, kWeightDecay = 0.01f, kMaxNorm = 1.0f;

torch::Tensor GlobalBatch(int step) {
  torch::manual_seed(1000 + step);
  return torch::randint(kVocab, {kGlobalBatch, kSeq}, torch::kLong);
}

worker::TinyTransformer MakeModel(torch::Dtype dtype = torch::kFloat32) {
  torch::manual_seed(0);
  worker::TinyTransformer m(kVocab, kDim, kLayers);
  m->to(dtype);
  return m;
}

// Uneven split of the global batch into `parts` non-empty micro-batches: [begin, end) sample ranges.
std::vector<std::pair<int, int>> Split(int parts) {
  std::vector<int> size(parts, 1);
  int left = kGlobalBatch - parts, weight_sum = 0;
  for (int p = 0; p < parts; ++p) weight_sum += 1 + p % 3;
  for (int p = 0; p < parts; ++p) {
    const int extra = (kGlobalBatch - parts) * (1 + p % 3) / weight_sum;
    size[p] += extra;
    left -= extra;
  }
  for (int p = 0; left > 0; p = (p + 1) % parts, --left) ++size[p];
  std::vector<std::pair<int, int>> out;
  int begin = 0;
  for (int s : size) {
    out.push_back({begin, begin + s});
    begin += s;
  }
  return out;
}

// Single-process reference: mean loss over all tokens of the global batch, clip, torch::optim::AdamW.
std::vector<torch::Tensor> ReferenceParameters() {
  worker::TinyTransformer model = MakeModel();
  torch::optim::AdamW opt(
      model->parameters(),
      torch::optim::AdamWOptions(kLr).weight_decay(kWeightDecay).betas({0.9, 0.999}).eps(1e-8));
  for (int s = 0; s < kSteps; ++s) {
    opt.zero_grad();
    torch::Tensor batch = GlobalBatch(s);
    // Backward on the summed loss, then divide the gradients: the same arithmetic as a mean loss, rounded in
    // the same place as the ZeRO-2 driver (which divides by the global unit count at the step).
    model->LossSum(batch).backward();
    for (auto& p : model->parameters()) p.mutable_grad().div_(static_cast<double>(kGlobalBatch * (kSeq - 1)));
    torch::nn::utils::clip_grad_norm_(model->parameters(), kMaxNorm);
    opt.step();
  }
  std::vector<torch::Tensor> out;
  for (const auto& p : model->parameters()) out.push_back(p.detach().clone());
  return out;
}

struct Diff {
  double max_rel = 0;       // max over tensors of max|a - b| / max|b|
  double max_elem_rel = 0;  // max over elements of |a - b| / max(|b|, floor)
  double max_abs = 0;
};

Diff Compare(const std::vector<torch::Tensor>& got, const std::vector<torch::Tensor>& want, double floor) {
  Diff d;
  for (size_t i = 0; i < got.size(); ++i) {
    torch::Tensor a = got[i].to(torch::kDouble), b = want[i].to(torch::kDouble);
    torch::Tensor abs = (a - b).abs();
    d.max_abs = std::max(d.max_abs, abs.max().item<double>());
    d.max_rel = std::max(d.max_rel, abs.max().item<double>() / b.abs().max().item<double>());
    d.max_elem_rel = std::max(d.max_elem_rel, (abs / b.abs().clamp_min(floor)).max().item<double>());
  }
  return d;
}

struct Config {
  int accumulation;
  AccumulationMode mode;
  size_t bucket_bytes;
};

std::unique_ptr<comm::Communicator> MakeComm() {
  comm::CommOptions options;
  options.timeout = absl::Seconds(60);
  auto c = comm::CreateHostCommunicator(testing::MpiEnv(), options);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

// Trains with ZeRO-2 and returns the final parameters (every rank holds all of them after the all-gather).
std::vector<torch::Tensor> TrainZero2(comm::Communicator* comm, const Config& cfg, torch::Dtype dtype,
                                      sharding::Zero2MemoryStats* memory, sharding::Zero2Stats* stats,
                                      sharding::OffloadOptions offload = {}) {
  worker::TinyTransformer model = MakeModel(dtype);
  sharding::Zero2Options o;
  o.param_dtype = dtype == torch::kBFloat16 ? core::DType::kBFloat16 : core::DType::kFloat32;
  o.bucket_bytes = cfg.bucket_bytes;
  o.accumulation_mode = cfg.mode;
  o.adamw.weight_decay = kWeightDecay;
  o.max_grad_norm = kMaxNorm;
  o.offload = offload;
  auto binding = Zero2Binding::Bind(*model, o, comm);
  EXPECT_TRUE(binding.ok()) << binding.status();
  if (!binding.ok()) return {};
  const int w = comm->world_size(), r = comm->rank();
  const auto parts = Split(w * cfg.accumulation);
  for (int s = 0; s < kSteps; ++s) {
    torch::Tensor batch = GlobalBatch(s);
    for (int k = 0; k < cfg.accumulation; ++k) {
      const auto [begin, end] = parts[k * w + r];
      torch::Tensor mb = batch.slice(0, begin, end);
      const absl::Status st =
          (*binding)->Backward(model->LossSum(mb), k == cfg.accumulation - 1, (end - begin) * (kSeq - 1));
      EXPECT_TRUE(st.ok()) << st;
      if (!st.ok()) return {};
    }
    auto res = (*binding)->Step(kLr);
    EXPECT_TRUE(res.ok()) << res.status();
    if (!res.ok()) return {};
    EXPECT_TRUE(res->applied);
    EXPECT_EQ(res->units, kGlobalBatch * (kSeq - 1));
  }
  const absl::Status flushed = (*binding)->optimizer().Flush();
  EXPECT_TRUE(flushed.ok()) << flushed;
  *memory = (*binding)->optimizer().memory();
  *stats = (*binding)->optimizer().stats();
  const sharding::BucketPlan& plan = (*binding)->optimizer().plan();
  EXPECT_EQ(memory->optimizer_state_bytes(), 12 * plan.shard_numel());
  EXPECT_EQ(plan.shard_numel() * static_cast<size_t>(w), plan.flat_numel());
  // Padding is bounded: per bucket, less than one alignment unit per parameter plus world * alignment.
  const size_t align = o.alignment_bytes / core::DTypeSize(o.param_dtype);
  EXPECT_LT(plan.flat_numel() - plan.numel(),
            plan.buckets().size() * w * align + plan.params().size() * align);
  std::vector<torch::Tensor> out;
  for (const auto& p : model->parameters()) out.push_back(p.detach().to(torch::kFloat32).clone());
  return out;
}

TEST(Zero2EquivalenceTest, MatchesTorchAdamWOnTheSameGlobalBatch) {
  torch::set_num_threads(1);
  const std::vector<torch::Tensor> want = ReferenceParameters();
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  const int w = comm->world_size();
  const Config configs[] = {
      {1, AccumulationMode::kReduceScatterEveryMicroBatch, 2048},
      {1, AccumulationMode::kReduceScatterEveryMicroBatch, 1 << 20},
      {1, AccumulationMode::kReduceOncePerStep, 2048},
      {1, AccumulationMode::kReduceOncePerStep, 1 << 20},
      {4, AccumulationMode::kReduceScatterEveryMicroBatch, 2048},
      {4, AccumulationMode::kReduceScatterEveryMicroBatch, 1 << 20},
      {4, AccumulationMode::kReduceOncePerStep, 2048},
      {4, AccumulationMode::kReduceOncePerStep, 1 << 20},
  };
  for (const Config& cfg : configs) {
    sharding::Zero2MemoryStats mem;
    sharding::Zero2Stats stats;
    const std::vector<torch::Tensor> got = TrainZero2(comm.get(), cfg, torch::kFloat32, &mem, &stats);
    ASSERT_EQ(got.size(), want.size());
    const Diff d = Compare(got, want, 1e-2);
    if (comm->rank() == 0) {
      std::printf(
          "world %d accumulation %d %-33s bucket %7zu B: max rel diff %.3g (per tensor), "
          "elementwise %.3g (|b| >= 1e-2), max abs diff %.3g, optimizer state %zu B/rank, buckets launched "
          "during backward %llu/%llu\n",
          w, cfg.accumulation, sharding::AccumulationModeName(cfg.mode), cfg.bucket_bytes, d.max_rel,
          d.max_elem_rel, d.max_abs, mem.optimizer_state_bytes(),
          static_cast<unsigned long long>(stats.buckets_launched_before_end),
          static_cast<unsigned long long>(stats.buckets_launched));
    }
    // Summation order differs (micro-batches, ranks), so bit equality is impossible; elements whose gradient
    // is mostly cancellation noise are the most sensitive, hence the looser elementwise bound.
    EXPECT_LE(d.max_abs, 1e-6);
    EXPECT_LE(d.max_elem_rel, 5e-5);
    EXPECT_LE(d.max_rel, 1e-5) << "world " << w << " accumulation " << cfg.accumulation << " "
                               << sharding::AccumulationModeName(cfg.mode) << " bucket " << cfg.bucket_bytes;
    if (cfg.bucket_bytes == 2048) {
      // Small buckets: most reduce-scatters must start while backward is still running.
      EXPECT_GT(stats.buckets_launched_before_end, stats.buckets_launched / 2);
    }
    // Offloaded to (pinned) host memory with the threaded SIMD CPU AdamW: the same bits as without offload.
    sharding::OffloadOptions offload;
    offload.enabled = true;
    offload.threads = 2;
    sharding::Zero2MemoryStats off_mem;
    const std::vector<torch::Tensor> off =
        TrainZero2(comm.get(), cfg, torch::kFloat32, &off_mem, &stats, offload);
    ASSERT_EQ(off.size(), got.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(torch::equal(off[i], got[i])) << "offload differs from on-device update, parameter " << i;
    }
    EXPECT_EQ(off_mem.optimizer_state_bytes(), mem.optimizer_state_bytes());
    EXPECT_GE(off_mem.host_state_bytes, off_mem.optimizer_state_bytes());
  }
}

// Reference for the delayed parameter update starting at step `start`: updates s >= start run in the
// background, so the gradient of step s is taken at the parameters published before it: w_{s-1} (one update
// stale) when update s-1 was delayed (s-1 >= start), w_s otherwise; torch::optim::AdamW applies it to the
// latest master weights.
std::vector<torch::Tensor> ReferenceDelayedParameters(int start) {
  worker::TinyTransformer master = MakeModel();
  worker::TinyTransformer stale = MakeModel();
  torch::optim::AdamW opt(
      master->parameters(),
      torch::optim::AdamWOptions(kLr).weight_decay(kWeightDecay).betas({0.9, 0.999}).eps(1e-8));
  std::vector<std::vector<torch::Tensor>> snapshots;
  auto snapshot = [&] {
    std::vector<torch::Tensor> s;
    for (const auto& p : master->parameters()) s.push_back(p.detach().clone());
    snapshots.push_back(s);
  };
  snapshot();
  for (int s = 0; s < kSteps; ++s) {
    {
      torch::NoGradGuard no_grad;
      const auto& w = snapshots[s - 1 >= start ? s - 1 : s];
      auto params = stale->parameters();
      for (size_t i = 0; i < params.size(); ++i) params[i].copy_(w[i]);
    }
    stale->zero_grad();
    stale->LossSum(GlobalBatch(s)).backward();
    for (auto& p : stale->parameters()) p.mutable_grad().div_(static_cast<double>(kGlobalBatch * (kSeq - 1)));
    torch::nn::utils::clip_grad_norm_(stale->parameters(), kMaxNorm);
    auto mp = master->parameters();
    auto sp = stale->parameters();
    for (size_t i = 0; i < mp.size(); ++i) mp[i].mutable_grad() = sp[i].grad().clone();
    opt.step();
    snapshot();
  }
  return snapshots.back();
}

TEST(Zero2EquivalenceTest, DelayedParameterUpdateMatchesAOneStepStaleReference) {
  torch::set_num_threads(1);
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  sharding::OffloadOptions offload;
  offload.enabled = true;
  offload.threads = 2;
  const std::vector<torch::Tensor> synchronous = ReferenceParameters();
  for (auto [mode, start] : {std::pair{AccumulationMode::kReduceScatterEveryMicroBatch, 0},
                             std::pair{AccumulationMode::kReduceOncePerStep, 0},
                             std::pair{AccumulationMode::kReduceScatterEveryMicroBatch, 7}}) {
    offload.delayed_update_from = start;
    const std::vector<torch::Tensor> want = ReferenceDelayedParameters(start);
    // The delayed reference really differs from synchronous training, so matching it means something.
    ASSERT_GT(Compare(want, synchronous, 1e-2).max_abs, 1e-4);
    sharding::Zero2MemoryStats mem;
    sharding::Zero2Stats stats;
    const std::vector<torch::Tensor> got =
        TrainZero2(comm.get(), {2, mode, 2048}, torch::kFloat32, &mem, &stats, offload);
    ASSERT_EQ(got.size(), want.size());
    const Diff d = Compare(got, want, 1e-2);
    if (comm->rank() == 0) {
      std::printf(
          "delayed update from step %d, world %d %s: max rel diff %.3g (per tensor), elementwise %.3g, max "
          "abs %.3g\n",
          start, comm->world_size(), sharding::AccumulationModeName(mode), d.max_rel, d.max_elem_rel,
          d.max_abs);
    }
    EXPECT_LE(d.max_abs, 1e-6);
    EXPECT_LE(d.max_elem_rel, 5e-5);
    EXPECT_LE(d.max_rel, 1e-5);
    // The two gradient accumulators double the fp32 gradient shard.
    EXPECT_EQ(mem.shard_grad_bytes, 2 * mem.master_bytes);
  }
}

TEST(Zero2EquivalenceTest, Bf16ParametersWithFp32MasterTrackTheFp32Reference) {
  torch::set_num_threads(1);
  const std::vector<torch::Tensor> want = ReferenceParameters();
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  sharding::Zero2MemoryStats mem;
  sharding::Zero2Stats stats;
  const std::vector<torch::Tensor> got = TrainZero2(
      comm.get(), {2, AccumulationMode::kReduceScatterEveryMicroBatch, 4096}, torch::kBFloat16, &mem, &stats);
  ASSERT_EQ(got.size(), want.size());
  // bf16 forward/backward and bf16 parameters: agreement to bf16 precision of the update path, not 1e-5.
  const Diff d = Compare(got, want, 1e-1);
  if (comm->rank() == 0)
    std::printf("bf16 vs fp32 reference: max rel diff %.3g, max abs %.3g\n", d.max_rel, d.max_abs);
  EXPECT_LT(d.max_abs, 3e-2);
  EXPECT_EQ(mem.flat_param_bytes, 2 * (mem.master_bytes / 4) * static_cast<size_t>(comm->world_size()));
}

}  // namespace
}  // namespace zerofit::worker
