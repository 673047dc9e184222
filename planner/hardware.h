// Hardware profiles: GPU memory, GPUs and host RAM per node, and the rates the throughput model uses.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace zerofit::planner {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kGB = 1e9;

// The worker build whose tensors the activation terms count (memory_model.h; docs/planning.md, "Activations
// of the project's model"). Two things differ between builds:
// - the attention kernel (attention_kernel.h): eager softmax(q k^T) keeps [heads, T] probabilities per token;
//   LibTorch 2.x's scaled-dot-product attention (cuDNN / flash kernels) keeps q, k, v, its output and an fp32
//   logsumexp per head;
// - LibTorch 1.x's autograd keeps mean()'s input (it saves `self` to read its numel), so each RMSNorm keeps
//   one more fp32 tensor than under 2.x, where only the sizes are saved.
enum class WorkerKernels {
  kLibTorch1Eager,  // Debian 12's LibTorch 1.13: the CPU workers and the measurement harness
  kLibTorch2Sdpa,   // LibTorch 2.x with attention auto: the GPU workers
};
const char* WorkerKernelsName(WorkerKernels k);

struct Hardware {
  std::string name;
  int gpus_per_node = 8;
  double gpu_bytes = 64 * kGB;              // memory of one GPU as sold (64 GB = 64e9 bytes)
  double host_bytes_per_node = 1024 * kGB;  // RAM of one node
  // Throughput model inputs (dense bf16 peak; achievable fractions are in throughput terms of search.h).
  double bf16_flops = 300e12;
  double hbm_bytes_per_s = 1.6e12;        // GPU memory bandwidth (generation is bound by it)
  double intra_node_bytes_per_s = 150e9;  // per GPU, one direction (NVLink / xGMI)
  double inter_node_bytes_per_s = 25e9;   // per GPU share of the node's network, one direction
  double host_link_bytes_per_s = 25e9;    // GPU <-> pinned host (PCIe), one direction
  double cpu_adam_params_per_s = 1.0e9;   // CPU AdamW updates per second per GPU's share of the node's cores
  // The 8-bit CPU AdamW's rate relative to the fp32 one (offload with training.optim: adamw_8bit): 0.25,
  // measured with cpu_adamw_bench on 2 Zen 5 cores at 64M parameters (566.6 vs 2217.6 Mparam/s, AVX-512,
  // bf16 gradients and copy; 0.14 on one core; BENCHMARKS.md "8-bit AdamW moments with offload"). The 8-bit
  // step is compute-bound and scales with cores where the fp32 one is memory-bound: with more cores per GPU
  // the ratio is higher. A host without AVX-512 runs the AVX2 kernel: 0.11 there, the term 2.3x optimistic.
  double cpu_adam_8bit_relative_rate = 0.25;
  // Host time of one eager decode step per decoder layer: LibTorch dispatching the layer's operators and
  // launching their kernels. Measured on an H200's host (LibTorch 2.11, Qwen2.5-0.5B shape in bf16, 24
  // layers, 2026-11-27): 13.36 ms a step at batch 8 whatever the length, the device idle most of it
  // (docs/gpu-runs/2026-11-27-h200-55dadb9.md). A GPU's eager decode step takes the longer of this and
  // its memory traffic.
  double eager_decode_layer_s = 0.557e-3;
  // The same for a decode step replayed as a CUDA graph: no host dispatch, but the graph's ~30 kernels a
  // layer run one after another, a few microseconds each whatever the batch. Measured on the same H200
  // (2026-11-27, docs/gpu-runs/2026-11-27-h200-7d5f4cd.md): 439.2 ms for 128 + 128 tokens at batch 8,
  // 3.43 ms a step (fitted on it); batch 32 ran 499.7 ms.
  double graphed_decode_layer_s = 0.143e-3;
  // Memory a training process holds besides tensors: CUDA context, cuDNN's workspace, the driver's own.
  double runtime_bytes = 1.0 * kGiB;
  // cuBLAS's workspace per thread that runs GEMMs. LibTorch 2.x allocates it from the caching allocator, one
  // per (cuBLAS handle, stream), and a handle per thread (aten/src/ATen/cuda/CublasHandlePool.cpp), so the
  // allocated bytes count it, twice once a backward has run (memory_model.cc). The default of
  // CUBLAS_WORKSPACE_CONFIG there: 4096 KiB x 8 = 32 MiB on compute capability 9 and up (Hopper, Blackwell),
  // :4096:2:16:8 = 8,519,680 B before. On an H200 (2026-11-27, docs/gpu-runs/2026-11-27-h200-7d5f4cd.md)
  // every GRPO generation pass after the first backward held exactly 32 MiB more (beside a term still
  // unexplained). A custom GPU takes the larger.
  double blas_workspace_bytes = 32.0 * (1 << 20);
  // NCCL's own buffers (channels x peers x buffer size), per process.
  double nccl_bytes = 0.5 * kGiB;
  // Caching-allocator fragmentation, as a fraction of the dynamic (activation) bytes.
  double fragmentation = 0.10;
  // A CPU-only profile (the measurement harness): no runtime, NCCL or fragmentation terms.
  bool cpu = false;
  // GPU profiles: the GPU workers' build; "cpu": Debian's LibTorch 1.13.
  WorkerKernels kernels = WorkerKernels::kLibTorch2Sdpa;
  // The workers run RMSNorm, SwiGLU's gating and the rotary embedding as fused kernels (a CUDA build on CUDA
  // tensors, worker/torch/model/fused_kernels.h), whose autograd nodes keep and allocate less than the
  // LibTorch graphs. GPU profiles: true; "cpu": false (the CPU workers run the graphs).
  bool fused_pieces = true;
};

// "8x64GB" (default rates), "h100-80", "8xa100-40", "4xrtx4090-24", or "cpu". Known GPUs: a100-40, a100-80,
// h100-80, h200-141, v100-32, rtx4090-24. "NxMGB" is a custom GPU of M GB. Host RAM per node defaults to what
// such nodes usually carry and can be overridden with host_gb > 0.
absl::StatusOr<Hardware> ParseHardware(const std::string& spec, double host_gb = 0);
std::vector<std::string> HardwareNames();

}  // namespace zerofit::planner
