// The one small ZeRO-2 job that the device-ordering tests (zero2_device_mpi_test.cc: host device against
// the test device), the staged-communicator tests (zero2_staged_mpi_test.cc: ranks sharing a device over
// MPI against the host oracle) and the emulated GPU's test (zero2_emulated_cuda_test.cc) train: its
// parameters, options, gradients and what is compared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "comm/communicator.h"
#include "core/dtype.h"
#include "gtest/gtest.h"
#include "offload/offload_shard_updater.h"
#include "sharding/zero2_optimizer.h"

namespace zerofit::sharding::testjob {

struct Config {
  std::string name;
  AccumulationMode mode;
  core::DType dtype;
  bool offload;
  bool delayed;
  // 8-bit moments (optim/adamw_8bit.h) for the parameters of at least 256 elements (embed and w1).
  bool eight_bit = false;
  // Clipping to a norm: off where devices sum the gradient norm in different orders and must still agree
  // bit for bit (the norm is then reported, not applied).
  bool clip = true;
};

struct Outcome {
  std::vector<uint8_t> params;  // the flat parameter buffer
  std::vector<float> master, m, v;
  std::vector<float> grad_norms;
};

inline std::vector<ParamSpec> Specs() {
  return {
      {"embed", 300, true}, {"norm", 17, false}, {"w1", 513, true}, {"w2", 129, true}, {"head", 64, true}};
}

// Several buckets and staging reuses, clipping, weight decay and (with c.offload) the offload pipeline.
inline Zero2Options Options(const Config& c) {
  Zero2Options o;
  o.param_dtype = c.dtype;
  o.bucket_bytes = 256 * core::DTypeSize(c.dtype);
  o.max_staging_buffers = 2;
  o.accumulation_mode = c.mode;
  o.adamw.weight_decay = 0.1f;
  o.max_grad_norm = c.clip ? 0.5f : 0.0f;
  o.offload.enabled = c.offload;
  o.offload.threads = 2;
  o.offload.delayed_update_from = c.delayed ? 1 : -1;
  if (c.eight_bit) {
    o.moments.format = optim::MomentFormat::kBlockwise8bit;
    o.moments.min_8bit_size = 256;
  }
  return o;
}

// Where the job runs; with c.offload the engine's updater is offload::OffloadShardUpdater.
inline Zero2Devices Devices(device::Device* device, comm::Communicator* host_comm) {
  return Zero2Devices{device, host_comm, offload::OffloadShardUpdater::Create};
}

// A deterministic, rank-dependent value for (step, micro-batch, parameter, element).
inline float GradValue(int rank, int step, int micro, size_t param, size_t e) {
  const uint32_t h = static_cast<uint32_t>(rank * 7919 + step * 104729 + micro * 1299709 + param * 15485863 +
                                           e * 2654435761u);
  return (static_cast<float>(h % 2001) - 1000.0f) * 1e-3f;
}

}  // namespace zerofit::sharding::testjob
