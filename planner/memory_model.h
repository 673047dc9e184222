// The memory model: peak bytes per GPU (itemised) and host bytes per node of one training job under one
// strategy. Pure arithmetic on ModelShape; no LibTorch.
//
// Activations are those of the project's own model implementation (worker/torch/model/llama_model.cc) under
// LibTorch autograd: what each decoder layer keeps for backward, per token, was counted with the
// measurement harness (worker/torch/train/memory_probe.h) by varying one dimension at a time, and each
// coefficient is explained in docs/planning.md. A GPU profile counts the GPU workers' build instead (LibTorch
// 2.x with SDPA attention: Hardware::kernels), checked against an H200's measured peaks
// (tests/planner/measured_gpu_peaks_test.cc). The peak is the largest of the phases of a step:
//   forward end + loss head backward (the fp32 vocab-sized gradients of a policy),
//   a decoder layer's backward (its MLP gradients; with checkpointing the recomputed layer on top of the
//   checkpoints), a reference/reward model's no-grad forward (DPO, Safe-RLHF), and GRPO generation with its
//   KV cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "planner/hardware.h"
#include "planner/model_shape.h"

namespace zerofit::planner {

enum class Task { kSft, kReward, kDpo, kGrpo };
// The frozen reference policy of DPO and GRPO (worker/torch/train/reference_model.h): a resident copy, a copy
// pinned on the host and copied in for each forward, log-probs precomputed once (DPO), or the policy's own
// frozen base with its LoRA adapters disabled (LoRA only: no second copy).
enum class Reference { kNone, kResident, kOffloaded, kPrecomputed, kLoraBase };

const char* TaskName(Task t);
absl::StatusOr<Task> ParseTask(const std::string& name);
const char* ReferenceName(Reference r);
// "none", "resident", "offloaded", "precomputed" or "lora-base" (ReferenceName's names).
absl::StatusOr<Reference> ParseReference(const std::string& name);
// Whether the reference runs a forward in every micro-batch (resident, offloaded, lora-base): the step's
// time and its reference-forward memory phase both follow from it.
bool ReferenceRunsForward(Reference r);

// What the user fixes.
struct Workload {
  Task task = Task::kSft;
  int64_t seq_len = 2048;     // longest training sequence, prompt + response (GRPO: prompt_len + new_tokens)
  int64_t global_batch = 64;  // per optimizer step: sequences (sft), pairs (reward, dpo), prompts (grpo)
  // GRPO rollouts.
  int64_t prompt_len = 512;
  int64_t new_tokens = 1024;
  int64_t samples_per_prompt = 16;
  // Frozen models besides policy and reference, resident on every GPU (Safe-RLHF: reward + cost = 2).
  int extra_frozen_models = 0;
  int element_bytes = 2;      // parameters and activations: 2 (bf16, GPUs) or 4 (fp32, the CPU harness)
  int64_t dataset_pairs = 0;  // DPO precomputed reference: pairs in the training set (host table)
  // Offload's delayed parameter update (training.delayed_update_from): the update of one step reads one
  // gradient buffer while the next step's gradients land in a second one, fp32 shard and bf16 staging each.
  bool delayed_update = false;
  // GRPO: the rollouts' decode steps replay a CUDA graph (rollout.decode: cuda_graph, or auto on a GPU), so
  // a step waits for its kernels (Hardware::graphed_decode_layer_s), not for the host to dispatch every
  // operator (Hardware::eager_decode_layer_s).
  bool graphed_decode = false;
  // AdamW's moments 8-bit blockwise (training.optim: adamw_8bit; sharding/quantized_moments.h): a byte each
  // and a scale per 256 elements, fp32 ones for the tensors under min_8bit_size; tensors and ranks' blocks
  // aligned to 256 elements. With offload they live in ordinary (unpinned) host memory, next to the pinned
  // fp32 master and gradient accumulator.
  bool eight_bit_moments = false;
  int64_t min_8bit_size = 4096;
};

// What the planner chooses.
struct Strategy {
  int64_t micro_batch = 1;  // per GPU per micro-step: sequences (sft, grpo training) or pairs (reward, dpo)
  int64_t gradient_accumulation = 1;  // micro-steps per optimizer step
  int zero_stage = 2;                 // 0 (DDP), 1, 2 (the workers' engine), 3 (estimate only)
  bool offload = false;               // optimizer state, fp32 gradient shard and the AdamW step on the host
  bool checkpointing = false;
  int64_t lora_rank = 0;  // LoRA on q/k/v/o; 0 = full fine-tune
  Reference reference = Reference::kNone;
  int64_t rollout_prompts = 1;  // GRPO: prompts per GPU per generation pass
  size_t bucket_bytes = 25u << 20;
  int staging_buffers = 3;  // reduce-scatter staging buffers (Zero2Options::max_staging_buffers)
};

struct MemoryItem {
  std::string name;
  double bytes = 0;
  std::string detail;  // the formula with its numbers
};

struct MemoryEstimate {
  std::vector<MemoryItem> device;  // per GPU, at the peak
  std::vector<MemoryItem> host;    // per node
  double device_bytes = 0;         // sum of `device`
  double host_bytes = 0;           // sum of `host`
  double activation_bytes = 0;     // the activation part of the peak (incl. transient gradients)
  std::string peak_phase;          // which phase of the step sets the peak
  int64_t trainable_parameters = 0;
};

// Activation bytes of one forward/backward of `rows` sequences of `seq_len` tokens (no-grad phases
// excluded). Exposed for the unit tests and the harness.
struct ActivationEstimate {
  double saved = 0;   // kept for backward at the end of the forward (incl. rope tables and mask)
  double peak = 0;    // saved + the largest transient of backward
  double logits = 0;  // the part of `peak` that is a policy's log-prob head (chunked logits, weight gradient)
  std::string phase;
};
// One forward/backward as EstimateActivations sees it.
struct ActivationJob {
  int64_t rows = 1;
  int64_t seq_len = 1;
  int element_bytes = 2;
  bool checkpointing = false;
  int64_t lora_rank = 0;
  bool policy_head = false;  // a policy's log-prob head (else a reward model's score)
  // Positions per row the policy head scores (GRPO: the completion, new_tokens); -1: every position that
  // predicts a token (seq_len - 1).
  int64_t head_positions = -1;
  WorkerKernels kernels = WorkerKernels::kLibTorch1Eager;
  // The plain RMSNorm and SwiGLU graphs outside checkpointed layers too, as the worker kept them before
  // 2026-11-28 (tests/planner/measured_gpu_peaks_test.cc plans the runs measured then).
  bool plain_pieces = false;
  // The fused RMSNorm, SwiGLU and rotary kernels (Hardware::fused_pieces), checkpointed layers included.
  bool fused_pieces = false;
};
ActivationEstimate EstimateActivations(const ModelShape& m, const ActivationJob& job);

// Bytes per token a decoder layer keeps for backward (the harness-counted coefficients, and what the
// worker build changes of them: hardware.h's WorkerKernels). `checkpointed`: the layer under activation
// checkpointing, recomputed with the plain RMSNorm and SwiGLU graphs (llama_model.h); otherwise the lean
// ones. `fused`: the fused pieces (ActivationJob::fused_pieces) in either case.
double LayerSavedBytesPerToken(const ModelShape& m, int64_t seq_len, int element_bytes, int64_t lora_rank,
                               WorkerKernels kernels, bool checkpointed, bool fused = false);

// GRPO's generation pass per GPU (worker/torch/model/generation.h: one pass of `sequences` prompts of
// prompt_len tokens, each decoding new_tokens over a KvCache, sampled): the cache and the largest transient
// on top of it (the prefill's attention or MLP, sampling a token, a decode step at full length), counted
// with the harness (memory_probe.h); docs/planning.md explains each term.
struct GenerationEstimate {
  double kv_cache = 0;   // K and V (KvCacheBytes) plus the cache's int64 key positions
  double transient = 0;  // the largest phase below, on top of the cache
  std::string phase;     // "prefill attention", "prefill MLP", "sampling" or "decode attention"
};
// `fused_pieces`: the workers' fused RMSNorm, SwiGLU and rotary kernels (Hardware::fused_pieces).
GenerationEstimate EstimateGeneration(const ModelShape& m, int64_t sequences, int64_t prompt_len,
                                      int64_t new_tokens, int element_bytes, bool fused_pieces = false);

// GRPO's two passes per GPU, each the device bytes every phase holds (weights, gradients, buckets, optimizer
// state, reference and frozen models; on a GPU the runtime's) plus the pass's dynamic peak (on a GPU with
// its fragmentation). EstimateMemory's peak is the larger of the two.
struct GrpoPasses {
  double generation = 0, training = 0;  // bytes
  // Their dynamic parts (the bytes above the static items; generation: the KV cache and its transient).
  double generation_dynamic = 0, training_dynamic = 0;
  // The tensors of each pass: the pass without the runtime's bytes (CUDA context, NCCL) and the allocator's
  // fragmentation, what a GPU's caching allocator reports as allocated (plus zerofit's device seam).
  double generation_tensors = 0, training_tensors = 0;
  std::string generation_phase, training_phase;
};
GrpoPasses EstimateGrpoPasses(const ModelShape& m, const Workload& w, const Strategy& s, const Hardware& hw,
                              int world_size);

MemoryEstimate EstimateMemory(const ModelShape& m, const Workload& w, const Strategy& s, const Hardware& hw,
                              int world_size);

}  // namespace zerofit::planner
