// How this process runs a training plan, as opposed to what the plan trains (PreferenceTrainOptions,
// preference_session.h, filled from the plan by plan_options.h alone): which GPU, how the ranks exchange
// gradients, how many host threads update offloaded state, which attention kernel, how large the held-out
// batches are. The launcher, the program's flags and the tests fill it. None of it changes what is
// trained: two runs that differ only here train the same model up to float rounding (the order of a
// reduction, another attention kernel).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "comm/device_comm.h"
#include "sharding/zero2_optimizer.h"
#include "worker/torch/model/llama_model.h"
#include "worker/torch/train/training_backend.h"

namespace zerofit::worker {

struct RuntimeOptions {
  int local_rank = 0;  // the GPU of this rank: cuda:<local_rank> (the launcher's view of this process)
  // On CUDA: NCCL, or MPI staged through pinned memory (auto: when ranks outnumber a node's GPUs and share
  // them; comm/device_comm.h).
  comm::DeviceComm device_comm = comm::DeviceComm::kAuto;
  NcclFactory nccl;  // optional: how to make the NCCL communicator (default: bootstrapped over MPI)
  // When gradients are reduce-scattered (every micro-batch, or once per step) and in what bucket size.
  sharding::AccumulationMode accumulation_mode = sharding::AccumulationMode::kReduceScatterEveryMicroBatch;
  size_t bucket_bytes = 1 << 20;
  int offload_threads = 0;  // CPU AdamW threads with offload; 0: the CPUs this process may run on
  AttentionKernel attention = AttentionKernel::kAuto;
  // Where RMSNorm, SwiGLU and the rotary embedding run as fused kernels (fused_kernels.h): on CUDA tensors;
  // off: the lean pieces (the fused kernels' speed measured against them, bench/prefs_bench_table.py).
  FusedKernels fused_kernels = FusedKernels::kCuda;
  int64_t eval_batch = 64;  // held-out pairs (or prompts) per forward
  // GRPO on CUDA, a diagnostic: each rank records the stack of every CUDA caching-allocator allocation and
  // writes the live blocks at each pass boundary of every step to this file (rank r > 0: FILE.rank<r>);
  // cuda_allocations.h. Empty: off.
  std::string cuda_allocation_report;
};

}  // namespace zerofit::worker
