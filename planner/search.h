// The plan search: every combination of micro-batch (with the accumulation that keeps the global batch), ZeRO
// stage, optimizer offload, activation checkpointing, LoRA rank (only when allowed), DPO/GRPO reference
// strategy and GRPO rollout batch is sized with EstimateMemory, kept if it fits under the safety cap (and the
// host RAM cap), and ranked by the throughput model below. Every option value that was not chosen gets one
// line saying why.
//
// Throughput model (per optimizer step, per GPU; stated so that its ranking can be checked):
//   compute   = tokens x (2 x forward params + attention) x (1 forward + 2 backward, or 1 with LoRA: no
//               weight gradients for frozen weights) / (bf16 peak x MFU); MFU = 0.45 x t / (t + 512) for
//               t tokens per micro-batch (small micro-batches leave the GPU idle)
//   recompute = one more forward when checkpointing
//   reference = a forward of the reference (resident, offloaded) and of every extra frozen model
//   comm      = ZeRO-2: reduce-scatter of the gradient every micro-batch + all-gather of the parameters per
//               step, (W-1)/W x bytes each over NVLink (one node) or the network (several); stage 0/1: one
//               all-reduce per step; stage 3 adds two parameter all-gathers per micro-batch. Collectives
//               overlap backward; only what exceeds 80% of backward time is exposed.
//   offload   = gradient shard down + parameter shard up over PCIe, CPU AdamW on the shard (not overlapped)
//   generate  = GRPO: new_tokens decode steps per rollout pass, each reading the weights and the KV cache
//               from GPU memory (bandwidth bound)
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/hardware.h"
#include "planner/memory_model.h"
#include "planner/model_shape.h"

namespace zerofit::planner {

struct Constraints {
  int nodes = 1;
  bool allow_lora = false;
  std::vector<int64_t> lora_ranks = {8, 16, 64};
  double safety = 0.95;       // device cap = safety x GPU memory (64 GB -> 60.8 GB)
  double host_safety = 0.80;  // host cap = host_safety x node RAM
  int max_stage = 2;  // ZeRO stages searched: 0..max_stage (the workers run stage 2; 3 is an estimate)
  int64_t max_micro_batch = 64;
  size_t bucket_bytes = 25u << 20;
  // Pinned by the user (not searched) when set.
  std::optional<int> zero_stage;
  std::optional<bool> offload;
  std::optional<bool> checkpointing;
  std::optional<Reference> reference;
  std::optional<int64_t> micro_batch;
  std::optional<int64_t> lora_rank;  // a LoRA rank the job already uses (0 = full fine-tune)
};

struct StepTime {
  double compute = 0, recompute = 0, reference = 0, communication = 0, offload = 0, generation = 0;
  double total() const { return compute + recompute + reference + communication + offload + generation; }
};

StepTime EstimateStepTime(const ModelShape& m, const Workload& w, const Strategy& s, const Hardware& hw,
                          int nodes);

struct Candidate {
  Strategy strategy;
  MemoryEstimate memory;
  StepTime time;
  bool fits = false;
};

struct Plan {
  ModelShape model;
  Workload workload;
  Hardware hardware;
  int nodes = 1;
  int world_size = 1;
  double device_cap = 0;  // bytes per GPU
  double host_cap = 0;    // bytes per node
  Candidate chosen;
  std::vector<std::string> rejected;  // one line per option value not chosen
  // Levers the search does not pull itself because they change what is trained, with what they would give:
  // 8-bit AdamW moments (training.optim: adamw_8bit) where they avoid offload or step faster.
  std::vector<std::string> levers;
  size_t candidates_searched = 0;
  size_t candidates_fitting = 0;
};

// FailedPrecondition when nothing fits (the message names the smallest configuration and what dominates it,
// and what fits with 8-bit AdamW moments if anything does).
absl::StatusOr<Plan> MakePlan(const ModelShape& m, const Workload& w, const Hardware& hw,
                              const Constraints& c);

// One-line descriptions used in tables and explanations.
std::string DescribeStrategy(const Strategy& s, Task task);
std::string FormatBytes(double bytes);  // "60.80 GB"

// Times in one unit chosen by the largest of them (`reference`): "2.969 s", "3.21 ms", "420.5 us"; a
// tiny model's step is not "0.000 s".
struct TimeUnit {
  double per_second = 1;
  const char* name = "s";
  int decimals = 3;
};
TimeUnit TimeUnitFor(double reference_seconds);
std::string FormatTime(double seconds, const TimeUnit& unit);  // without the unit's name

}  // namespace zerofit::planner
