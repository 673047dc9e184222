// Single-process tests of the ZeRO-2 driver against a recording communicator; the multi-rank equivalence with
// torch::optim::AdamW lives in tests/worker/torch/zero2_equivalence_test.cc.
#include "sharding/zero2_optimizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "comm/local/local_communicator.h"
#include "device/test/test_device.h"

namespace zerofit::sharding {
namespace {

using comm::Buffer;
using comm::ReduceOp;

// A Work that reports completion only once somebody waits on it, like a collective still on the wire.
class DeferredWork final : public comm::Work {
 public:
  explicit DeferredWork(std::unique_ptr<comm::Work> inner) : inner_(std::move(inner)) {}
  absl::Status Wait(absl::Duration t) override {
    waited_ = true;
    return inner_->Wait(t);
  }
  bool IsCompleted() override { return waited_; }

 private:
  std::unique_ptr<comm::Work> inner_;
  bool waited_ = false;
};

// Forwards to a LocalCommunicator and logs every call as "<Op>:<count>". With `defer`, reduce-scatters look
// unfinished until waited on.
class RecordingCommunicator final : public comm::Communicator {
 public:
  std::vector<std::string> log;
  bool defer = false;
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string backend_name() const override { return "recording"; }
  const comm::CommOptions& options() const override { return inner_.options(); }
  absl::StatusOr<std::unique_ptr<comm::Work>> ReduceScatter(Buffer in, Buffer out, ReduceOp op,
                                                            device::Stream* after) override {
    log.push_back("ReduceScatter:" + std::to_string(in.count));
    auto w = inner_.ReduceScatter(in, out, op, after);
    if (!defer || !w.ok()) return w;
    return std::unique_ptr<comm::Work>(std::make_unique<DeferredWork>(std::move(*w)));
  }
  absl::StatusOr<std::unique_ptr<comm::Work>> AllGather(Buffer in, Buffer out,
                                                        device::Stream* after) override {
    log.push_back("AllGather:" + std::to_string(out.count));
    return inner_.AllGather(in, out, after);
  }
  absl::StatusOr<std::unique_ptr<comm::Work>> AllReduce(Buffer buf, ReduceOp op,
                                                        device::Stream* after) override {
    log.push_back("AllReduce:" + std::to_string(buf.count));
    return inner_.AllReduce(buf, op, after);
  }
  absl::StatusOr<std::unique_ptr<comm::Work>> Broadcast(Buffer buf, int root,
                                                        device::Stream* after) override {
    log.push_back("Broadcast:" + std::to_string(buf.count));
    return inner_.Broadcast(buf, root, after);
  }
  absl::Status Barrier(absl::Duration t) override { return inner_.Barrier(t); }
  void Abort() override { inner_.Abort(); }

 private:
  comm::LocalCommunicator inner_;
};

// Three parameters of 8 fp32 elements, buckets of 8 elements (one parameter each): bucket 0 = param 2.
std::vector<ParamSpec> ThreeParams() { return {{"a", 8, true}, {"b", 8, false}, {"c", 8, true}}; }

constexpr float kLr = 0.1f;  // every step's rate

Zero2Options SmallBuckets(AccumulationMode mode) {
  Zero2Options o;
  o.bucket_bytes = 8 * 4;
  o.accumulation_mode = mode;
  o.adamw.weight_decay = 0.1f;
  return o;
}

std::vector<float> Fill(size_t n, float base) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = base + 0.25f * static_cast<float>(i);
  return v;
}

TEST(Zero2OptimizerTest, LaunchesEachBucketAsSoonAsItIsCompleteInOrder) {
  RecordingCommunicator comm;
  auto opt = Zero2Optimizer::Create(ThreeParams(),
                                    SmallBuckets(AccumulationMode::kReduceScatterEveryMicroBatch), &comm);
  ASSERT_TRUE(opt.ok()) << opt.status();
  ASSERT_EQ((*opt)->plan().buckets().size(), 3u);
  ASSERT_TRUE((*opt)->InitializeFromParameters().ok());
  comm.log.clear();
  const std::vector<float> g = Fill(8, 1.0f);
  ASSERT_TRUE((*opt)->BeginMicroBatch(true).ok());
  // Param 1 (bucket 1) finishes before param 2 (bucket 0): bucket 1 must wait for bucket 0 to launch first.
  ASSERT_TRUE((*opt)->OnGradientReady(1, g.data()).ok());
  EXPECT_TRUE(comm.log.empty());
  ASSERT_TRUE((*opt)->OnGradientReady(2, g.data()).ok());
  EXPECT_EQ(comm.log, std::vector<std::string>({"ReduceScatter:16", "ReduceScatter:16"}));
  ASSERT_TRUE((*opt)->OnGradientReady(0, g.data()).ok());
  EXPECT_EQ(comm.log.size(), 3u);
  EXPECT_EQ((*opt)->stats().buckets_launched_before_end, 3u);
  ASSERT_TRUE((*opt)->EndMicroBatch(1).ok());
  auto r = (*opt)->Step(kLr);
  ASSERT_TRUE(r.ok()) << r.status();
  // A true reduce-scatter per bucket, one scalar all-reduce (norm + units), one all-gather per bucket.
  EXPECT_EQ(comm.log,
            std::vector<std::string>({"ReduceScatter:16", "ReduceScatter:16", "ReduceScatter:16",
                                      "AllReduce:2", "AllGather:16", "AllGather:16", "AllGather:16"}));
}

TEST(Zero2OptimizerTest, OptimizerStateIsTwelveBytesPerShardElement) {
  for (AccumulationMode mode :
       {AccumulationMode::kReduceScatterEveryMicroBatch, AccumulationMode::kReduceOncePerStep}) {
    comm::LocalCommunicator comm;
    auto opt = Zero2Optimizer::Create(ThreeParams(), SmallBuckets(mode), &comm);
    ASSERT_TRUE(opt.ok());
    const Zero2MemoryStats m = (*opt)->memory();
    EXPECT_EQ(m.optimizer_state_bytes(), 12 * (*opt)->plan().shard_numel());
    EXPECT_EQ(m.flat_param_bytes, 4 * (*opt)->plan().flat_numel());
    EXPECT_EQ(m.flat_grad_bytes, mode == AccumulationMode::kReduceOncePerStep ? m.flat_param_bytes : 0u);
  }
}

// Reference: plain AdamW on each parameter with grad = (sum of micro-batch gradients) / units.
std::vector<std::vector<float>> ReferenceStep(std::vector<std::vector<float>> params,
                                              const std::vector<std::vector<float>>& grad_sums, double units,
                                              const Zero2Options& o, const std::vector<ParamSpec>& specs,
                                              float clip) {
  for (size_t i = 0; i < params.size(); ++i) {
    std::vector<float> m(params[i].size()), v(params[i].size());
    optim::AdamWHyper h = optim::StepHyper(o.adamw, kLr);
    if (!specs[i].weight_decay) h.weight_decay = 0;
    optim::CpuAdamWScalar(params[i].data(), grad_sums[i].data(), m.data(), v.data(), params[i].size(), h, 1,
                          static_cast<float>(clip / units));
  }
  return params;
}

TEST(Zero2OptimizerTest, NormalisesByUnitsAcrossUnevenMicroBatchesInBothModes) {
  const auto specs = ThreeParams();
  for (AccumulationMode mode :
       {AccumulationMode::kReduceScatterEveryMicroBatch, AccumulationMode::kReduceOncePerStep}) {
    comm::LocalCommunicator comm;
    const Zero2Options o = SmallBuckets(mode);
    auto opt = Zero2Optimizer::Create(specs, o, &comm);
    ASSERT_TRUE(opt.ok());
    std::vector<std::vector<float>> init;
    for (size_t i = 0; i < 3; ++i) {
      init.push_back(Fill(8, 0.5f * static_cast<float>(i) - 1.0f));
      std::memcpy((*opt)->param_data(i), init[i].data(), 32);
    }
    ASSERT_TRUE((*opt)->InitializeFromParameters().ok());
    std::vector<std::vector<float>> sums(3, std::vector<float>(8, 0.0f));
    const double units[2] = {1, 3};  // micro-batch of 1 sample, then of 3
    for (int k = 0; k < 2; ++k) {
      ASSERT_TRUE((*opt)->BeginMicroBatch(k == 1).ok());
      for (size_t i = 3; i-- > 0;) {
        const std::vector<float> g = Fill(8, static_cast<float>(k + 1) * (static_cast<float>(i) - 0.7f));
        for (size_t e = 0; e < 8; ++e) sums[i][e] += g[e];
        if (mode == AccumulationMode::kReduceOncePerStep) {
          float* dst = static_cast<float*>((*opt)->grad_data(i));
          for (size_t e = 0; e < 8; ++e) dst[e] += g[e];
          ASSERT_TRUE((*opt)->OnGradientReady(i, nullptr).ok());
        } else {
          ASSERT_TRUE((*opt)->OnGradientReady(i, g.data()).ok());
        }
      }
      ASSERT_TRUE((*opt)->EndMicroBatch(units[k]).ok());
    }
    auto r = (*opt)->Step(kLr);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->applied);
    EXPECT_EQ(r->units, 4.0);
    double sq = 0;
    for (const auto& s : sums)
      for (float x : s) sq += (x / 4.0) * (x / 4.0);
    EXPECT_NEAR(r->grad_norm, std::sqrt(sq), 1e-5 * std::sqrt(sq));
    const auto want = ReferenceStep(init, sums, 4.0, o, specs, 1.0f);
    for (size_t i = 0; i < 3; ++i) {
      const float* got = static_cast<const float*>((*opt)->param_data(i));
      for (size_t e = 0; e < 8; ++e) EXPECT_NEAR(got[e], want[i][e], 1e-6) << AccumulationModeName(mode);
    }
  }
}

// One micro-batch a step (Zero2Options::micro_batches_per_step 1): no fp32 accumulator, the norm and AdamW
// read the bf16 landing, and every step lands on the accumulator path's bits (0 + x is x; widening is exact).
TEST(Zero2OptimizerTest, OneMicroBatchAStepKeepsNoAccumulatorAndStepsTheSameBits) {
  Zero2Options o = SmallBuckets(AccumulationMode::kReduceScatterEveryMicroBatch);
  o.param_dtype = core::DType::kBFloat16;
  o.bucket_bytes = 8 * 2;
  o.max_grad_norm = 0.5f;  // clipping reads the norm of the landed shard
  comm::LocalCommunicator comm_a, comm_b;
  auto acc = Zero2Optimizer::Create(ThreeParams(), o, &comm_a);
  o.micro_batches_per_step = 1;
  auto lean = Zero2Optimizer::Create(ThreeParams(), o, &comm_b);
  ASSERT_TRUE(acc.ok() && lean.ok());
  EXPECT_EQ((*acc)->memory().shard_grad_bytes, 4 * (*acc)->plan().shard_numel());
  EXPECT_EQ((*lean)->memory().shard_grad_bytes, 0u);
  for (Zero2Optimizer* opt : {acc->get(), lean->get()}) {
    for (size_t i = 0; i < 3; ++i) {
      std::vector<uint16_t> init(8);
      for (size_t e = 0; e < 8; ++e) init[e] = core::FloatToBf16(0.3f * static_cast<float>(i + e) - 1.0f);
      std::memcpy(opt->param_data(i), init.data(), 16);
    }
    ASSERT_TRUE(opt->InitializeFromParameters().ok());
  }
  // One micro-batch of bf16 gradients, element e of parameter i being value(i * 8 + e).
  auto micro_batch = [](Zero2Optimizer* opt, bool last, double units,
                        const std::function<float(size_t)>& value) {
    ASSERT_TRUE(opt->BeginMicroBatch(last).ok());
    for (size_t i = 3; i-- > 0;) {
      std::vector<uint16_t> g(8);
      for (size_t e = 0; e < 8; ++e) g[e] = core::FloatToBf16(value(i * 8 + e));
      ASSERT_TRUE(opt->OnGradientReady(i, g.data()).ok());
    }
    ASSERT_TRUE(opt->EndMicroBatch(units).ok());
  };
  for (int step = 0; step < 3; ++step) {
    float norms[2];
    int k = 0;
    for (Zero2Optimizer* opt : {acc->get(), lean->get()}) {
      micro_batch(opt, true, 2.0,
                  [step](size_t j) { return std::sin(1.7f * static_cast<float>(step * 31 + j)); });
      auto r = opt->Step(kLr);
      ASSERT_TRUE(r.ok()) << r.status();
      norms[k++] = r->grad_norm;
    }
    EXPECT_EQ(norms[0], norms[1]) << "step " << step;
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(std::memcmp((*acc)->param_data(i), (*lean)->param_data(i), 16), 0)
          << "step " << step << " " << i;
    }
  }
  // A step of two micro-batches after all: the updater allocates the accumulator then, and the step lands on
  // the accumulator path's bits.
  for (Zero2Optimizer* opt : {acc->get(), lean->get()}) {
    for (int k = 0; k < 2; ++k) {
      micro_batch(opt, k == 1, 1.0,
                  [k](size_t j) { return std::cos(0.9f * static_cast<float>(k * 29 + j)); });
    }
    ASSERT_TRUE(opt->Step(kLr).ok());
  }
  EXPECT_EQ((*lean)->memory().shard_grad_bytes, 4 * (*lean)->plan().shard_numel());
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(std::memcmp((*acc)->param_data(i), (*lean)->param_data(i), 16), 0) << "two micro-batches " << i;
  }
}

// Every step after the first reports a step's device clock unless the step before reported its own: a report
// is the step itself if the device has run it by then, else the one before, which it always has (the step's
// one host sync, the gradient norm, waits for work that the compute stream runs after the previous step's
// markings), and no step is reported twice. Which of the two a step gets depends on the device's thread (CI
// under ASan saw a step report its own and the next one nothing). The forward that the caller scopes, and
// the update that Step() scopes itself, are there, on the device's time.
TEST(Zero2OptimizerTest, EachStepReportsTheLatestStepTheDeviceHasRun) {
  device::TestDevice dev;
  comm::LocalCommunicator comm;
  Zero2Devices devices;
  devices.device = &dev;
  auto opt = Zero2Optimizer::Create(
      ThreeParams(), SmallBuckets(AccumulationMode::kReduceScatterEveryMicroBatch), &comm, devices);
  ASSERT_TRUE(opt.ok()) << opt.status();
  ASSERT_TRUE((*opt)->InitializeFromParameters().ok());
  const std::vector<float> g = Fill(8, 1.0f);
  int64_t last_reported = 0;
  int reports = 0;
  for (int step = 0; step < 6; ++step) {
    ASSERT_TRUE((*opt)->BeginMicroBatch(true).ok());
    {
      ScopedStage forward((*opt)->profile(), Stage::kForward);
      ASSERT_TRUE(dev.compute_stream()
                      .HostFunc([] {
                        std::this_thread::sleep_for(std::chrono::milliseconds(5));
                        return absl::OkStatus();
                      })
                      .ok());
    }
    {
      ScopedStage backward((*opt)->profile(), Stage::kBackward);
      for (size_t i = 3; i-- > 0;) ASSERT_TRUE((*opt)->OnGradientReady(i, g.data()).ok());
    }
    ASSERT_TRUE((*opt)->EndMicroBatch(1).ok());
    auto r = (*opt)->Step(kLr);
    ASSERT_TRUE(r.ok()) << r.status();
    if (!r->breakdown.device.has_value()) {
      // Step 0's own markings may not have run yet; a later step's are missing only if the previous step
      // (counted from 1: `step`) was reported by the call before.
      if (step > 0) {
        EXPECT_EQ(last_reported, step) << "step " << step << " reported nothing";
      }
      continue;
    }
    const DeviceStepTimes& t = *r->breakdown.device;
    EXPECT_GE(t.step, step) << "the previous step (counted from 1) at the latest";
    EXPECT_LE(t.step, step + 1);
    EXPECT_GT(t.step, last_reported) << "no step is reported twice";
    last_reported = t.step;
    ++reports;
    EXPECT_GE(t.stage_ms[static_cast<size_t>(DeviceStage::kForward)], 4.5);
    EXPECT_GE(t.stage_ms[static_cast<size_t>(DeviceStage::kUpdate)], 0.0);
    EXPECT_GE(t.step_ms, t.stage_ms[static_cast<size_t>(DeviceStage::kForward)]);
  }
  EXPECT_GE(reports, 3) << "at least every other step of six";
  ASSERT_TRUE((*opt)->Flush().ok());
}

TEST(Zero2OptimizerTest, ClipsToMaxNorm) {
  comm::LocalCommunicator comm;
  Zero2Options o = SmallBuckets(AccumulationMode::kReduceScatterEveryMicroBatch);
  o.max_grad_norm = 0.5f;
  auto opt = Zero2Optimizer::Create(ThreeParams(), o, &comm);
  ASSERT_TRUE(opt.ok());
  ASSERT_TRUE((*opt)->InitializeFromParameters().ok());
  const std::vector<float> g(8, 1.0f);  // norm sqrt(24)
  ASSERT_TRUE((*opt)->BeginMicroBatch(true).ok());
  for (size_t i = 0; i < 3; ++i) ASSERT_TRUE((*opt)->OnGradientReady(i, g.data()).ok());
  ASSERT_TRUE((*opt)->EndMicroBatch(1).ok());
  auto r = (*opt)->Step(kLr);
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->grad_norm, std::sqrt(24.0), 1e-5);
  EXPECT_NEAR(r->clip_coef, 0.5 / (std::sqrt(24.0) + 1e-6), 1e-7);
}

TEST(Zero2OptimizerTest, UnusedParametersReduceAsZeroAtEndOfMicroBatch) {
  RecordingCommunicator comm;
  auto opt = Zero2Optimizer::Create(ThreeParams(),
                                    SmallBuckets(AccumulationMode::kReduceScatterEveryMicroBatch), &comm);
  ASSERT_TRUE(opt.ok());
  ASSERT_TRUE((*opt)->InitializeFromParameters().ok());
  comm.log.clear();
  const std::vector<float> g(8, 2.0f);
  ASSERT_TRUE((*opt)->BeginMicroBatch(true).ok());
  ASSERT_TRUE((*opt)->OnGradientReady(2, g.data()).ok());  // params 0 and 1 unused
  ASSERT_TRUE((*opt)->EndMicroBatch(1).ok());
  EXPECT_EQ(comm.log.size(), 3u);
  auto r = (*opt)->Step(kLr);
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->grad_norm, std::sqrt(8 * 4.0), 1e-5);
}

TEST(Zero2OptimizerTest, Fp16OverflowSkipsTheStepAndBacksOff) {
  comm::LocalCommunicator comm;
  Zero2Options o = SmallBuckets(AccumulationMode::kReduceScatterEveryMicroBatch);
  o.param_dtype = core::DType::kFloat16;
  o.loss_scaling.enabled = true;
  o.loss_scaling.initial_scale = 1024;
  auto opt = Zero2Optimizer::Create(ThreeParams(), o, &comm);
  ASSERT_TRUE(opt.ok()) << opt.status();
  for (size_t i = 0; i < 3; ++i) {
    uint16_t* p = static_cast<uint16_t*>((*opt)->param_data(i));
    for (size_t e = 0; e < 8; ++e) p[e] = core::FloatToFp16(0.5f);
  }
  ASSERT_TRUE((*opt)->InitializeFromParameters().ok());
  std::vector<uint16_t> g(8, core::FloatToFp16(1.0f));
  g[3] = core::FloatToFp16(std::numeric_limits<float>::infinity());
  ASSERT_TRUE((*opt)->BeginMicroBatch(true).ok());
  for (size_t i = 0; i < 3; ++i) ASSERT_TRUE((*opt)->OnGradientReady(i, g.data()).ok());
  ASSERT_TRUE((*opt)->EndMicroBatch(1).ok());
  auto r = (*opt)->Step(kLr);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->applied);
  EXPECT_EQ(r->loss_scale, 1024);
  EXPECT_EQ((*opt)->loss_scale(), 512);
  EXPECT_EQ((*opt)->step(), 0);
  for (size_t i = 0; i < 3; ++i) {
    const uint16_t* p = static_cast<const uint16_t*>((*opt)->param_data(i));
    for (size_t e = 0; e < 8; ++e) EXPECT_EQ(core::Fp16ToFloat(p[e]), 0.5f);
  }
  // The next, finite step is applied with the smaller scale, and fp16 parameters move.
  std::vector<uint16_t> ok(8, core::FloatToFp16(512.0f));
  ASSERT_TRUE((*opt)->BeginMicroBatch(true).ok());
  for (size_t i = 0; i < 3; ++i) ASSERT_TRUE((*opt)->OnGradientReady(i, ok.data()).ok());
  ASSERT_TRUE((*opt)->EndMicroBatch(1).ok());
  r = (*opt)->Step(kLr);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->applied);
  EXPECT_NEAR(r->grad_norm, std::sqrt(24.0), 1e-4);  // 512 / scale 512 = 1 per element
  EXPECT_LT(core::Fp16ToFloat(static_cast<const uint16_t*>((*opt)->param_data(0))[0]), 0.5f);
}

TEST(Zero2OptimizerTest, StagingPoolIsAllocatedUpFrontAndRecycledWithinItsLimit) {
  for (int limit : {1, 2, 3, 8}) {
    RecordingCommunicator comm;
    comm.defer = true;  // reduce-scatters stay in flight until the optimizer needs their buffers
    Zero2Options o = SmallBuckets(AccumulationMode::kReduceScatterEveryMicroBatch);
    o.max_staging_buffers = limit;
    auto opt = Zero2Optimizer::Create(ThreeParams(), o, &comm);
    ASSERT_TRUE(opt.ok());
    const size_t one = (*opt)->plan().max_bucket_numel() * 4;
    const size_t pool = std::min<size_t>(limit, (*opt)->plan().buckets().size());
    // Known before the first backward (what the planner predicts) ...
    EXPECT_EQ((*opt)->memory().staging_bytes_peak, pool * one) << "limit " << limit;
    const std::vector<float> g(8, 1.0f);
    for (int step = 0; step < 2; ++step) {
      ASSERT_TRUE((*opt)->BeginMicroBatch(true).ok());
      for (size_t i = 3; i-- > 0;) ASSERT_TRUE((*opt)->OnGradientReady(i, g.data()).ok());
      ASSERT_TRUE((*opt)->EndMicroBatch(1).ok());
      ASSERT_TRUE((*opt)->Step(kLr).ok());
    }
    // ... and unchanged by training: a bucket waits for the oldest reduce-scatter instead of allocating.
    EXPECT_EQ((*opt)->memory().staging_bytes_peak, pool * one) << "limit " << limit;
  }
}

// Gradients that arrive out of the buckets' launch order (a bucket of small parameters used far apart in the
// forward completes late, and the ones after it wait to launch): with nothing in flight a waiting bucket gets
// a buffer of its own size, not the largest bucket's, kept for the next micro-batches; the step is the same
// as with gradients in launch order. (Sized to the largest bucket, a GRPO step on a Qwen2.5-0.5B shape
// grew its staging by 4 embedding-sized buffers, 1.09 GB in bf16: issue 32's pass check.)
TEST(Zero2OptimizerTest, AWaitingBucketGetsAStagingBufferOfItsOwnSize) {
  const std::vector<ParamSpec> specs = {{"a", 64, true}, {"b", 8, false}, {"c", 8, true}};
  std::vector<std::vector<float>> finals;
  for (const bool out_of_order : {false, true}) {
    RecordingCommunicator comm;
    Zero2Options o = SmallBuckets(AccumulationMode::kReduceScatterEveryMicroBatch);
    o.max_staging_buffers = 1;
    auto opt = Zero2Optimizer::Create(specs, o, &comm);
    ASSERT_TRUE(opt.ok()) << opt.status();
    const BucketPlan& plan = (*opt)->plan();
    ASSERT_EQ(plan.buckets().size(), 3u);  // launch order: c, b, a (reverse registration)
    ASSERT_TRUE((*opt)->InitializeFromParameters().ok());
    const size_t largest = plan.max_bucket_numel() * 4, small = plan.buckets()[0].layout.padded_numel * 4;
    ASSERT_GT(largest, small);
    ASSERT_EQ(plan.buckets()[1].layout.padded_numel * 4, small);
    EXPECT_EQ((*opt)->memory().staging_bytes_peak, largest);
    // In order: c, b, a. Out of order: a first (it takes the pool's buffer and waits for c and b to launch),
    // then b (waits for c; nothing in flight: a buffer of b's size), then c (likewise).
    const std::vector<size_t> order =
        out_of_order ? std::vector<size_t>{0, 1, 2} : std::vector<size_t>{2, 1, 0};
    for (int step = 0; step < 2; ++step) {
      ASSERT_TRUE((*opt)->BeginMicroBatch(true).ok());
      for (size_t i : order) {
        const std::vector<float> g = Fill(specs[i].numel, 0.5f + static_cast<float>(i + step));
        ASSERT_TRUE((*opt)->OnGradientReady(i, g.data()).ok());
      }
      ASSERT_TRUE((*opt)->EndMicroBatch(1).ok());
      ASSERT_TRUE((*opt)->Step(kLr).ok());
      // Grown once, in the first micro-batch, by two buffers of the small buckets' size; reused after.
      EXPECT_EQ((*opt)->memory().staging_bytes_peak, out_of_order ? largest + 2 * small : largest) << step;
    }
    const float* a = static_cast<const float*>((*opt)->param_data(0));
    finals.emplace_back(a, a + specs[0].numel);
  }
  EXPECT_EQ(finals[0], finals[1]) << "the order gradients arrive in changes no value";
}

// OfferGradient: the same out-of-order arrival with a pool of one buffer. a and b wait (their buckets launch
// after c's, and the one buffer is kept for the bucket next in launch order); c takes it and launches; then b
// and a, each next in turn, take it back once the reduce-scatter before them has run. The pool never grows,
// and each gradient is released only once it has been copied.
TEST(Zero2OptimizerTest, OfferedGradientsWaitForTheirTurnInsteadOfGrowingThePool) {
  const std::vector<ParamSpec> specs = {{"a", 64, true}, {"b", 8, false}, {"c", 8, true}};
  std::vector<std::vector<float>> finals;
  for (const bool offered : {false, true}) {
    RecordingCommunicator comm;
    Zero2Options o = SmallBuckets(AccumulationMode::kReduceScatterEveryMicroBatch);
    o.max_staging_buffers = 1;
    auto opt = Zero2Optimizer::Create(specs, o, &comm);
    ASSERT_TRUE(opt.ok()) << opt.status();
    ASSERT_TRUE((*opt)->InitializeFromParameters().ok());
    const size_t pool = (*opt)->memory().staging_bytes_peak;
    for (int step = 0; step < 2; ++step) {
      ASSERT_TRUE((*opt)->BeginMicroBatch(true).ok());
      std::vector<std::vector<float>> grads;
      for (size_t i = 0; i < specs.size(); ++i) grads.push_back(Fill(specs[i].numel, 0.5f + i + step));
      if (!offered) {  // in launch order: c, b, a
        for (size_t i : {2, 1, 0}) ASSERT_TRUE((*opt)->OnGradientReady(i, grads[i].data()).ok());
      } else {
        ASSERT_TRUE((*opt)->OfferGradient(0, grads[0].data()).ok());
        EXPECT_TRUE((*opt)->TakeReleasedGradients().empty()) << "a waits";
        ASSERT_TRUE((*opt)->OfferGradient(1, grads[1].data()).ok());
        EXPECT_TRUE((*opt)->TakeReleasedGradients().empty()) << "b waits";
        ASSERT_TRUE((*opt)->OfferGradient(2, grads[2].data()).ok());
        EXPECT_EQ((*opt)->TakeReleasedGradients(), (std::vector<size_t>{2, 1, 0}));
      }
      ASSERT_TRUE((*opt)->EndMicroBatch(1).ok());
      ASSERT_TRUE((*opt)->Step(kLr).ok());
      EXPECT_EQ((*opt)->memory().staging_bytes_peak, pool) << step;
    }
    const float* a = static_cast<const float*>((*opt)->param_data(0));
    finals.emplace_back(a, a + specs[0].numel);
  }
  EXPECT_EQ(finals[0], finals[1]);
}

// Offered gradients in random orders, with parameters left out of some micro-batches (they reduce as zeros),
// several micro-batches a step, on the host device and on a test device whose streams run late: every step
// equals AdamW on the summed gradients bit for bit (the host AdamW kernels equal the scalar oracle bit for
// bit, optim/adamw_math.h, and both sides add the micro-batches in the same order in fp32), and the pool
// stays as allocated. On the host device a gradient is overwritten with NaN as soon as it is released, so a
// copy made after its release would show.
TEST(Zero2OptimizerTest, OfferedGradientsInAnyOrderStepLikeAdamWWithoutGrowingThePool) {
  const std::vector<ParamSpec> specs = {{"a", 8, true},  {"b", 16, false}, {"c", 8, true}, {"d", 24, true},
                                        {"e", 8, false}, {"f", 16, true},  {"g", 40, true}};
  for (const bool slow : {false, true}) {
    for (int limit : {1, 2, 3}) {
      SCOPED_TRACE(::testing::Message() << (slow ? "test device" : "host device") << ", pool " << limit);
      Zero2Options o = SmallBuckets(AccumulationMode::kReduceScatterEveryMicroBatch);
      o.max_staging_buffers = limit;
      device::TestDeviceOptions late;
      late.max_delay = absl::Microseconds(300);
      late.vary_stream_speed = true;
      device::TestDevice dev(late);
      comm::LocalCommunicator comm;
      Zero2Devices devices;
      if (slow) devices.device = &dev;
      auto opt = Zero2Optimizer::Create(specs, o, &comm, devices);
      ASSERT_TRUE(opt.ok()) << opt.status();
      const size_t pool = (*opt)->memory().staging_bytes_peak;
      std::vector<std::vector<float>> init;
      for (size_t i = 0; i < specs.size(); ++i) {
        init.push_back(Fill(specs[i].numel, 0.2f * static_cast<float>(i) - 0.7f));
        std::memcpy((*opt)->param_data(i), init[i].data(), specs[i].numel * 4);
      }
      ASSERT_TRUE((*opt)->InitializeFromParameters().ok());
      std::vector<std::vector<float>> m, v;  // the reference AdamW's moments
      for (const ParamSpec& p : specs) m.emplace_back(p.numel, 0.0f), v.emplace_back(p.numel, 0.0f);
      std::mt19937 rng(static_cast<unsigned>(17 * limit + slow));
      for (int step = 0; step < 3; ++step) {
        std::vector<std::vector<float>> sums;
        for (const ParamSpec& p : specs) sums.emplace_back(p.numel, 0.0f);
        std::vector<std::vector<float>> grads;  // alive until the step: the test device copies late
        grads.reserve(3 * specs.size());
        for (int k = 0; k < 3; ++k) {
          ASSERT_TRUE((*opt)->BeginMicroBatch(k == 2).ok());
          std::vector<size_t> order(specs.size());
          for (size_t i = 0; i < order.size(); ++i) order[i] = i;
          std::shuffle(order.begin(), order.end(), rng);
          order.pop_back();  // one parameter gets no gradient this micro-batch
          std::vector<std::vector<float>*> of(specs.size(), nullptr);
          size_t released = 0;
          for (size_t i : order) {
            grads.push_back(
                Fill(specs[i].numel, static_cast<float>(k + step + 1) * (static_cast<float>(i) - 3.1f)));
            of[i] = &grads.back();
            for (size_t e = 0; e < specs[i].numel; ++e) sums[i][e] += grads.back()[e];
            ASSERT_TRUE((*opt)->OfferGradient(i, grads.back().data()).ok());
            for (size_t r : (*opt)->TakeReleasedGradients()) {
              ASSERT_NE(of[r], nullptr) << "released a gradient never offered: " << r;
              if (!slow) std::fill(of[r]->begin(), of[r]->end(), std::nanf(""));
              ++released;
            }
          }
          ASSERT_TRUE((*opt)->EndMicroBatch(1.0).ok());
          released += (*opt)->TakeReleasedGradients().size();
          EXPECT_EQ(released, order.size()) << "every offered gradient is released by EndMicroBatch";
        }
        auto r = (*opt)->Step(kLr);
        ASSERT_TRUE(r.ok()) << r.status();
        ASSERT_TRUE((*opt)->Flush().ok());
        for (size_t i = 0; i < specs.size(); ++i) {
          optim::AdamWHyper h = optim::StepHyper(o.adamw, kLr);
          if (!specs[i].weight_decay) h.weight_decay = 0;
          optim::CpuAdamWScalar(init[i].data(), sums[i].data(), m[i].data(), v[i].data(), specs[i].numel, h,
                                step + 1, 1.0f / 3.0f);
          const float* got = static_cast<const float*>((*opt)->param_data(i));
          for (size_t e = 0; e < specs[i].numel; ++e)
            ASSERT_EQ(got[e], init[i][e]) << specs[i].name << e << " step " << step;
        }
        EXPECT_EQ((*opt)->memory().staging_bytes_peak, pool);
      }
    }
  }
}

// The up-front pool holds as many buffers as the largest buckets, each sized as one of them: one buffer of a
// bucket 4x the others' size, not two.
TEST(Zero2OptimizerTest, TheStagingPoolIsSizedAsTheLargestBuckets) {
  const std::vector<ParamSpec> specs = {{"a", 64, true}, {"b", 8, false}, {"c", 8, true}};
  for (int limit : {1, 2, 3}) {
    comm::LocalCommunicator comm;
    Zero2Options o = SmallBuckets(AccumulationMode::kReduceScatterEveryMicroBatch);
    o.max_staging_buffers = limit;
    auto opt = Zero2Optimizer::Create(specs, o, &comm);
    ASSERT_TRUE(opt.ok()) << opt.status();
    const size_t largest = (*opt)->plan().max_bucket_numel() * 4;
    const size_t small = (*opt)->plan().buckets()[0].layout.padded_numel * 4;
    EXPECT_EQ((*opt)->memory().staging_bytes_peak, largest + (limit - 1) * small) << "limit " << limit;
  }
}

// An updater that consumes each landed shard as it arrives (here: the device updater accumulating several
// micro-batches a step) gets a few landing slots, not a shard-sized buffer: two slots for six buckets, each
// reused three times a micro-batch. On the test device, whose streams run later than the host enqueues, a
// slot overwritten before its accumulation had read it would give wrong numbers.
TEST(Zero2OptimizerTest, ConsumedLandingsShareAPoolOfSlotsReusedInStreamOrder) {
  const std::vector<ParamSpec> specs = {{"a", 8, true},  {"b", 16, false}, {"c", 8, true},
                                        {"d", 24, true}, {"e", 8, false},  {"f", 16, true}};
  Zero2Options o = SmallBuckets(AccumulationMode::kReduceScatterEveryMicroBatch);
  o.max_staging_buffers = 2;
  device::TestDeviceOptions slow;
  slow.max_delay = absl::Microseconds(500);
  slow.vary_stream_speed = true;
  device::TestDevice dev(slow);
  comm::LocalCommunicator comm;
  Zero2Devices devices;
  devices.device = &dev;
  auto opt = Zero2Optimizer::Create(specs, o, &comm, devices);
  ASSERT_TRUE(opt.ok()) << opt.status();
  ASSERT_EQ((*opt)->plan().buckets().size(), 6u);
  std::vector<size_t> shards;
  for (const Bucket& b : (*opt)->plan().buckets()) shards.push_back(b.layout.shard_numel);
  std::sort(shards.rbegin(), shards.rend());
  EXPECT_EQ((*opt)->memory().recv_bytes, (shards[0] + shards[1]) * 4) << "two slots: the largest shards";
  EXPECT_LT((*opt)->memory().recv_bytes, (*opt)->plan().shard_numel() * 4);
  std::vector<std::vector<float>> init;
  for (size_t i = 0; i < specs.size(); ++i) {
    init.push_back(Fill(specs[i].numel, 0.3f * static_cast<float>(i) - 1.0f));
    std::memcpy((*opt)->param_data(i), init[i].data(), specs[i].numel * 4);
  }
  ASSERT_TRUE((*opt)->InitializeFromParameters().ok());
  std::vector<std::vector<float>> sums;
  for (const ParamSpec& p : specs) sums.emplace_back(p.numel, 0.0f);
  std::vector<std::vector<float>> grads;  // alive until the step: the device reads them in stream order
  for (int k = 0; k < 4; ++k) {
    ASSERT_TRUE((*opt)->BeginMicroBatch(k == 3).ok());
    for (size_t i = specs.size(); i-- > 0;) {
      grads.push_back(Fill(specs[i].numel, static_cast<float>(k + 1) * (static_cast<float>(i) - 2.3f)));
      for (size_t e = 0; e < specs[i].numel; ++e) sums[i][e] += grads.back()[e];
      ASSERT_TRUE((*opt)->OnGradientReady(i, grads.back().data()).ok());
    }
    ASSERT_TRUE((*opt)->EndMicroBatch(1.0).ok());
  }
  auto r = (*opt)->Step(kLr);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE((*opt)->Flush().ok());
  const auto want = ReferenceStep(init, sums, 4.0, o, specs, 1.0f);
  for (size_t i = 0; i < specs.size(); ++i) {
    const float* got = static_cast<const float*>((*opt)->param_data(i));
    for (size_t e = 0; e < specs[i].numel; ++e) EXPECT_NEAR(got[e], want[i][e], 1e-6) << specs[i].name << e;
  }
  // One micro-batch a step: AdamW reads the landed shards at the step, so they keep one shard-sized buffer.
  o.micro_batches_per_step = 1;
  comm::LocalCommunicator comm1;
  auto lean = Zero2Optimizer::Create(specs, o, &comm1);
  ASSERT_TRUE(lean.ok()) << lean.status();
  EXPECT_EQ((*lean)->memory().recv_bytes, (*lean)->plan().shard_numel() * 4);
}

TEST(Zero2OptimizerTest, FullFp32ReduceOnceLandsInTheShardWithoutALandingBuffer) {
  comm::LocalCommunicator comm;
  auto opt = Zero2Optimizer::Create(ThreeParams(), SmallBuckets(AccumulationMode::kReduceOncePerStep), &comm);
  ASSERT_TRUE(opt.ok());
  EXPECT_EQ((*opt)->memory().recv_bytes, 0u);
}

TEST(Zero2OptimizerTest, StepWithoutAnyUnitsIsAnError) {
  comm::LocalCommunicator comm;
  auto opt = Zero2Optimizer::Create(ThreeParams(),
                                    SmallBuckets(AccumulationMode::kReduceScatterEveryMicroBatch), &comm);
  ASSERT_TRUE(opt.ok());
  ASSERT_TRUE((*opt)->BeginMicroBatch(true).ok());
  ASSERT_TRUE((*opt)->EndMicroBatch(0).ok());
  const auto r = (*opt)->Step(kLr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("units"), std::string::npos);
  // A caller whose units may all be masked out (GRPO's token mean, truncated completions left out) asks for
  // at least one: the step runs on a zero gradient.
  ASSERT_TRUE((*opt)->BeginMicroBatch(true).ok());
  ASSERT_TRUE((*opt)->EndMicroBatch(0).ok());
  const auto floored = (*opt)->Step(kLr, /*min_units=*/1.0);
  ASSERT_TRUE(floored.ok()) << floored.status();
  EXPECT_EQ(floored->units, 1.0);
  EXPECT_EQ(floored->grad_norm, 0.0f);
  EXPECT_TRUE(floored->applied);
}

TEST(Zero2OptimizerTest, MisuseGetsClearErrors) {
  comm::LocalCommunicator comm;
  auto opt = Zero2Optimizer::Create(ThreeParams(),
                                    SmallBuckets(AccumulationMode::kReduceScatterEveryMicroBatch), &comm);
  ASSERT_TRUE(opt.ok());
  const std::vector<float> g(8, 1.0f);
  EXPECT_EQ((*opt)->OnGradientReady(0, g.data()).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE((*opt)->BeginMicroBatch(true).ok());
  EXPECT_EQ((*opt)->OnGradientReady(7, g.data()).code(), absl::StatusCode::kOutOfRange);
  ASSERT_TRUE((*opt)->OnGradientReady(1, g.data()).ok());
  const absl::Status twice = (*opt)->OnGradientReady(1, g.data());
  EXPECT_EQ(twice.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(twice.message().find("'b'"), std::string::npos);
  EXPECT_EQ((*opt)->Step(kLr).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*opt)->EndMicroBatch(-1).code(), absl::StatusCode::kInvalidArgument);
  Zero2Options bad = SmallBuckets(AccumulationMode::kReduceOncePerStep);
  bad.alignment_bytes = 6;
  EXPECT_EQ(Zero2Optimizer::Create(ThreeParams(), bad, &comm).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = SmallBuckets(AccumulationMode::kReduceOncePerStep);
  bad.max_staging_buffers = 0;
  EXPECT_EQ(Zero2Optimizer::Create(ThreeParams(), bad, &comm).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// sharding/ does not know the offload implementation: without a factory offload fails and says what to pass.
TEST(Zero2OptimizerTest, OffloadWithoutUpdaterFactoryFailsClearly) {
  comm::LocalCommunicator comm;
  Zero2Options o = SmallBuckets(AccumulationMode::kReduceScatterEveryMicroBatch);
  o.offload.enabled = true;
  const auto opt = Zero2Optimizer::Create(ThreeParams(), o, &comm);
  ASSERT_EQ(opt.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(opt.status().message().find("offload.enabled needs Zero2Devices.offload_updater"),
            std::string::npos)
      << opt.status();
  EXPECT_NE(opt.status().message().find("offload::OffloadShardUpdater::Create"), std::string::npos);
}

// The factory gets the engine's plan, dtype, offload options and profile; its error is Create's.
TEST(Zero2OptimizerTest, OffloadUpdaterFactoryGetsTheEnginesArguments) {
  comm::LocalCommunicator comm;
  Zero2Options o = SmallBuckets(AccumulationMode::kReduceOncePerStep);
  o.offload.enabled = true;
  o.offload.threads = 3;
  o.offload.delayed_update_from = 40;
  o.moments.format = optim::MomentFormat::kBlockwise8bit;  // with offload: the moments in host memory
  o.moments.min_8bit_size = 7;
  OffloadUpdaterArgs seen;  // its pointers die with the failed optimizer: only compared with null
  size_t shard_numel = 0;
  bool blocks_aligned = true;
  Zero2Devices devices;
  devices.offload_updater =
      [&](const OffloadUpdaterArgs& a) -> absl::StatusOr<std::unique_ptr<OffloadUpdater>> {
    seen = a;
    if (a.plan != nullptr) shard_numel = a.plan->shard_numel();
    for (const ShardSegment& seg : a.plan->segments()) blocks_aligned &= seg.shard_offset % 256 == 0;
    return absl::UnavailableError("fake updater");
  };
  const auto opt = Zero2Optimizer::Create(ThreeParams(), o, &comm, devices);
  EXPECT_EQ(opt.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(seen.plan, nullptr);
  EXPECT_GT(shard_numel, 0u);
  EXPECT_EQ(seen.param_dtype, o.param_dtype);
  EXPECT_NE(seen.device, nullptr);
  EXPECT_NE(seen.profile, nullptr);
  EXPECT_EQ(seen.options.threads, 3);
  EXPECT_EQ(seen.options.delayed_update_from, 40);
  EXPECT_TRUE(seen.moments.quantized());
  EXPECT_EQ(seen.moments.min_8bit_size, 7u);
  EXPECT_TRUE(blocks_aligned) << "8-bit moments' segments start on 256-element blocks, offloaded too";
  EXPECT_EQ(seen.timeout, comm.options().timeout);
}

}  // namespace
}  // namespace zerofit::sharding
