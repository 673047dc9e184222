// The ZeRO-2 test job (zero2_test_job.h) trained on any device, CUDA included: parameters, gradients and
// results move only through the compute stream's copies. zero2_staged_mpi_test.cc (ranks sharing a device)
// and zero2_emulated_cuda_test.cc (the emulated GPU) train with it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "core/dtype.h"
#include "device/device.h"
#include "gtest/gtest.h"
#include "sharding/zero2_optimizer.h"
#include "tests/sharding/zero2_test_job.h"

namespace zerofit::sharding::testjob {

constexpr int kSteps = 4;
constexpr int kMicroBatches = 3;
constexpr absl::Duration kTimeout = absl::Seconds(60);

inline void ExpectOk(const absl::Status& s) { EXPECT_TRUE(s.ok()) << s; }

inline std::vector<uint8_t> Encode(core::DType t, size_t n, const std::function<float(size_t)>& value) {
  std::vector<uint8_t> out(n * core::DTypeSize(t));
  for (size_t e = 0; e < n; ++e) core::StoreFromFloat(out.data(), t, e, value(e));
  return out;
}

// The job's optimizer on `device`, its parameters set through the compute stream and initialised.
inline std::unique_ptr<Zero2Optimizer> MakeJobOptimizer(const Config& c, device::Device* device,
                                                        comm::Communicator* comm,
                                                        comm::Communicator* host_comm) {
  auto opt = Zero2Optimizer::Create(Specs(), testjob::Options(c), comm, testjob::Devices(device, host_comm));
  EXPECT_TRUE(opt.ok()) << opt.status();
  if (!opt.ok()) return nullptr;
  Zero2Optimizer& z = **opt;
  device::Stream& compute = z.device().compute_stream();
  const auto specs = Specs();
  std::vector<std::vector<uint8_t>> init(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    init[i] = Encode(c.dtype, specs[i].numel, [](size_t e) { return 0.01f * ((e % 13) - 6.0f); });
    ExpectOk(compute.Copy(z.param_data(i), init[i].data(), init[i].size()));
  }
  ExpectOk(compute.Synchronize(kTimeout));
  ExpectOk(z.InitializeFromParameters());
  return std::move(*opt);
}

// One micro-batch's gradients, handed over as autograd would: accumulated into the flat gradient buffer
// (reduce once a step) or in `dev_grads`, device memory the compute stream fills.
inline void GiveGradients(Zero2Optimizer& z, const Config& c, std::vector<device::Buffer>& dev_grads,
                          int rank, int step, int micro) {
  device::Stream& compute = z.device().compute_stream();
  const auto specs = Specs();
  std::vector<std::vector<uint8_t>> grads(specs.size());  // alive until the stream has copied them
  for (size_t i = specs.size(); i-- > 0;) {
    grads[i] = Encode(c.dtype, specs[i].numel, [&](size_t e) { return GradValue(rank, step, micro, i, e); });
    if (c.mode == AccumulationMode::kReduceOncePerStep) {
      // Autograd's in-place accumulation into the flat gradient buffer, done through the host here.
      std::vector<uint8_t> acc(grads[i].size());
      ExpectOk(compute.Copy(acc.data(), z.grad_data(i), acc.size()));
      ExpectOk(compute.Synchronize(kTimeout));
      for (size_t e = 0; e < specs[i].numel; ++e) {
        core::StoreFromFloat(
            acc.data(), c.dtype, e,
            core::LoadAsFloat(acc.data(), c.dtype, e) + core::LoadAsFloat(grads[i].data(), c.dtype, e));
      }
      ExpectOk(compute.Copy(z.grad_data(i), acc.data(), acc.size()));
      ExpectOk(compute.Synchronize(kTimeout));
      ExpectOk(z.OnGradientReady(i, nullptr));
    } else {
      ExpectOk(compute.Copy(dev_grads[i].data(), grads[i].data(), grads[i].size()));
      ExpectOk(z.OnGradientReady(i, dev_grads[i].data()));
    }
  }
  ExpectOk(z.EndMicroBatch(10.0 + rank));
  ExpectOk(compute.Synchronize(kTimeout));  // before `grads` goes
}

// Steps [first, first + count) of kMicroBatches micro-batches each; their gradient norms go to `norms`.
inline void TrainJobSteps(Zero2Optimizer& z, const Config& c, int first, int count,
                          std::vector<float>* norms) {
  const auto specs = Specs();
  std::vector<device::Buffer> dev_grads;
  for (const auto& s : specs) {
    auto b = z.device().Allocate(s.numel * core::DTypeSize(c.dtype), device::MemoryKind::kDevice);
    ASSERT_TRUE(b.ok()) << b.status();
    dev_grads.push_back(std::move(*b));
  }
  const int rank = z.communicator()->rank();
  for (int step = first; step < first + count; ++step) {
    const float lr = 1e-2f / (step + 1);  // a schedule: the delayed update must keep its own rate
    for (int micro = 0; micro < kMicroBatches; ++micro) {
      ExpectOk(z.BeginMicroBatch(micro == kMicroBatches - 1));
      GiveGradients(z, c, dev_grads, rank, step, micro);
    }
    auto r = z.Step(lr);
    EXPECT_TRUE(r.ok()) << r.status();
    if (r.ok()) norms->push_back(r->grad_norm);
  }
}

// The parameters (through the compute stream) and the optimizer state, once every update has landed.
inline void ReadJobOutcome(Zero2Optimizer& z, const Config& c, Outcome* out) {
  const size_t elem = core::DTypeSize(c.dtype);
  device::Stream& compute = z.device().compute_stream();
  ExpectOk(z.Flush());
  out->params.resize(z.plan().flat_numel() * elem);
  const auto* flat = static_cast<const uint8_t*>(z.param_data(0)) - z.plan().placement(0).flat_offset * elem;
  ExpectOk(compute.Copy(out->params.data(), flat, out->params.size()));
  ExpectOk(compute.Synchronize(kTimeout));
  const size_t n = z.plan().shard_numel();
  out->master.resize(n);
  out->m.resize(n);
  out->v.resize(n);
  ExpectOk(z.CopyStateToHost(out->master.data(), out->m.data(), out->v.data()));
}

// kSteps steps of kMicroBatches micro-batches on any device: the host reaches device memory only through the
// compute stream's copies (CUDA memory is not host-readable).
inline Outcome TrainThroughComputeStream(const Config& c, device::Device* device, comm::Communicator* comm,
                                         comm::Communicator* host_comm) {
  Outcome out;
  std::unique_ptr<Zero2Optimizer> z = MakeJobOptimizer(c, device, comm, host_comm);
  if (z == nullptr) return out;
  TrainJobSteps(*z, c, 0, kSteps, &out.grad_norms);
  ReadJobOutcome(*z, c, &out);
  return out;
}

}  // namespace zerofit::sharding::testjob
