// The planner's measurement harness: runs real training steps of the project's model (LlamaModel through
// Zero2Binding, the same calls as PreferenceSession) on the CPU with a tracking allocator and reports the
// peak bytes per rank, to compare with planner::EstimateMemory for the same job.
//
// "Device" bytes on the CPU are what would live on the GPU: every LibTorch tensor (activations, logits,
// gradients in flight, frozen weights, a resident reference model), counted exactly by TrackingAllocator,
// plus the ZeRO-2 driver's own buffers that a GPU build keeps on the device (flat parameters, reduce-scatter
// staging and landing buffers, the optimizer shard when it is not offloaded). Offloaded state and pinned
// reference weights count as host bytes.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "core/hf_config.h"
#include "planner/memory_model.h"
#include "sharding/zero2_optimizer.h"
#include "worker/torch/train/reference_model.h"

namespace zerofit::worker {

// The reference strategy as the memory planner names it.
planner::Reference PlannerReference(ReferenceStrategy s);

struct ProbeJob {
  planner::Task task = planner::Task::kSft;
  core::HfModelConfig model;
  int64_t micro_batch = 1;        // sequences (sft) or pairs (reward, dpo: two rows each) per rank
  int64_t seq_len = 32;           // every row is exactly this long (no padding)
  int gradient_accumulation = 1;  // micro-batches per optimizer step
  bool checkpointing = false;
  int64_t lora_rank = 0;  // LoRA on q/k/v/o when > 0
  ReferenceStrategy reference = ReferenceStrategy::kResident;
  bool offload = false;
  bool bf16 = false;          // bf16 parameters and activations (fp32 master weights), else fp32
  bool eight_bit = false;     // 8-bit AdamW moments (Zero2Options::moments, bitsandbytes' min_8bit_size)
  bool plain_pieces = false;  // LlamaOptions.lean_pieces off: the plain RMSNorm and SwiGLU graphs
  // LlamaOptions.fused_kernels: kEverywhere measures the fused RMSNorm, SwiGLU and rotary nodes on the CPU
  // (the host references allocate what the CUDA kernels do, less the weight gradient's [1024, H] fp32
  // partials).
  FusedKernels fused_kernels = FusedKernels::kCuda;
  size_t bucket_bytes = 1 << 20;
  int steps = 2;  // the peak of the last step is reported (the first one allocates the optimizer state)
  uint64_t seed = 1;
  // GRPO (task grpo; seq_len is unused): each step generates a rollout of rollout_prompts random prompts of
  // prompt_len tokens x samples_per_prompt samples in one pass (no EOS: every completion has new_tokens),
  // then trains on micro_batch of its sequences (prompt_len + new_tokens tokens): a no-grad policy forward
  // for the old log-probs, with grpo_beta > 0 the frozen reference's no-grad forward (a resident copy, or
  // with `reference` lora-base the policy with its adapters off), and the policy's forward and backward
  // through GrpoPolicyLoss, the head over the completion positions only.
  int64_t prompt_len = 16;
  int64_t new_tokens = 16;
  int64_t samples_per_prompt = 4;
  int64_t rollout_prompts = 1;
  double grpo_beta = 0.0;
};

struct ProbeResult {
  int64_t torch_peak_bytes = 0;      // tracked LibTorch tensor bytes at the peak of the last step
  int64_t torch_static_bytes = 0;    // tracked bytes live just before the last step (weights, tables)
  int64_t forward_saved_bytes = 0;   // growth from the start of the last forward to its loss (1st micro)
  int64_t zero2_device_bytes = 0;    // ZeRO-2 buffers that live on the device in a GPU build
  int64_t device_peak_bytes = 0;     // torch_peak_bytes + zero2_device_bytes
  int64_t host_bytes = 0;            // offloaded optimizer state + pinned reference weights
  sharding::Zero2MemoryStats zero2;  // as reported by the optimizer
  // GRPO: the generation pass of the last step, measured separately from its training pass (whose peak
  // is torch_peak_bytes / device_peak_bytes above): tracked bytes at its peak (weights, the KV cache, the
  // decoding temporaries) and the same plus zero2_device_bytes; the KV cache's bytes (KvCache::bytes()).
  int64_t generation_static_bytes = 0;  // tracked bytes live just before the generation pass
  int64_t generation_torch_peak_bytes = 0;
  int64_t generation_peak_bytes = 0;
  int64_t kv_cache_bytes = 0;
};

// Collective: every rank of `comm` calls it with the same job. Task grpo measures both passes of a GRPO step
// (MeasureGrpoPeaks, memory_probe.cc).
absl::StatusOr<ProbeResult> MeasureTrainingPeak(const ProbeJob& job, comm::Communicator* comm);

}  // namespace zerofit::worker
