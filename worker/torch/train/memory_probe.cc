#include "worker/torch/train/memory_probe.h"

#include <torch/torch.h>

#include <memory>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "worker/torch/model/llama_model.h"
#include "worker/torch/train/objectives.h"
#include "worker/torch/train/pair_tensors.h"
#include "worker/torch/train/tracking_allocator.h"
#include "worker/torch/train/zero2_binding.h"

namespace zerofit::worker {

planner::Reference PlannerReference(ReferenceStrategy s) {
  switch (s) {
    case ReferenceStrategy::kResident:
      return planner::Reference::kResident;
    case ReferenceStrategy::kOffloaded:
      return planner::Reference::kOffloaded;
    case ReferenceStrategy::kPrecomputed:
      return planner::Reference::kPrecomputed;
  }
  return planner::Reference::kNone;
}

namespace {

using planner::Task;

// Random pairs of exactly seq_len tokens each: a prompt of seq_len / 2 and a response of the rest.
std::vector<data::PreferencePair> SyntheticPairs(int64_t n, int64_t seq_len, int64_t vocab, uint64_t seed) {
  std::mt19937_64 gen(seed);
  auto token = [&] { return static_cast<int32_t>(1 + gen() % static_cast<uint64_t>(vocab - 1)); };
  std::vector<data::PreferencePair> pairs(static_cast<size_t>(n));
  const int64_t prompt = seq_len / 2;
  for (auto& p : pairs) {
    for (int64_t i = 0; i < prompt; ++i) p.prompt.push_back(token());
    for (int64_t i = prompt; i < seq_len; ++i) {
      p.chosen.push_back(token());
      p.rejected.push_back(token());
    }
  }
  return pairs;
}

}  // namespace

absl::StatusOr<ProbeResult> MeasureTrainingPeak(const ProbeJob& job, comm::Communicator* comm) {
  if (job.task == Task::kGrpo) return absl::UnimplementedError("ProbeJob: GRPO training is not implemented");
  if (job.micro_batch < 1 || job.seq_len < 2 || job.accumulation < 1 || job.steps < 1) {
    return absl::InvalidArgumentError(
        "ProbeJob: micro_batch >= 1, seq_len >= 2, accumulation >= 1, steps >= 1");
  }
  TrackingAllocator allocator;
  ProbeResult r;
  try {
    ScopedTrackingAllocator scope(&allocator);
    torch::manual_seed(job.seed);
    LlamaOptions mo;
    mo.activation_checkpointing = job.checkpointing;
    mo.reward_head = job.task == Task::kReward;
    mo.lora.rank = job.lora_rank;
    mo.dtype = job.bf16 ? torch::kBFloat16 : torch::kFloat32;
    core::HfModelConfig config = job.model;
    if (mo.reward_head) config.num_labels = 1;
    ZF_ASSIGN_OR_RETURN(LlamaModel policy, MakeLlamaModel(config, mo));
    const int64_t pairs_per_step = job.micro_batch * job.accumulation;
    // SFT uses the chosen rows of the pairs only: micro_batch sequences.
    const std::vector<data::PreferencePair> pairs =
        SyntheticPairs(pairs_per_step * job.steps, job.seq_len, config.vocab_size, job.seed + comm->rank());
    std::unique_ptr<ReferenceModel> reference;
    if (job.task == Task::kDpo) {
      torch::manual_seed(job.seed);
      LlamaOptions ref_options;
      ref_options.dtype = mo.dtype;
      ZF_ASSIGN_OR_RETURN(LlamaModel ref_model, MakeLlamaModel(config, ref_options));
      ZF_ASSIGN_OR_RETURN(reference, ReferenceModel::Create(std::move(ref_model), job.reference));
      ZF_RETURN_IF_ERROR(reference->Precompute(pairs, 0, job.micro_batch, comm));
    }
    sharding::Zero2Options zo;
    zo.bucket_bytes = job.bucket_bytes;
    zo.offload.enabled = job.offload;
    zo.max_grad_norm = 1.0f;
    zo.param_dtype = job.bf16 ? core::DType::kBFloat16 : core::DType::kFloat32;
    ZF_ASSIGN_OR_RETURN(auto binding, Zero2Binding::Bind(*policy, zo, comm));

    for (int step = 0; step < job.steps; ++step) {
      const bool measured = step + 1 == job.steps;
      if (measured) {
        r.torch_static_bytes = allocator.live_bytes();
        allocator.ResetPeak();
      }
      for (int k = 0; k < job.accumulation; ++k) {
        std::vector<uint64_t> ids;
        for (int64_t i = 0; i < job.micro_batch; ++i)
          ids.push_back(static_cast<uint64_t>((step * job.accumulation + k) * job.micro_batch + i));
        ZF_ASSIGN_OR_RETURN(PairTensors b, MakePairTensors(pairs, ids, BatchPadId(config)));
        if (job.task == Task::kSft) {
          const int64_t n = job.micro_batch;
          b.tokens = b.tokens.slice(0, 0, n).contiguous();
          b.starts = b.starts.slice(0, 0, n).contiguous();
          b.lengths = b.lengths.slice(0, 0, n).contiguous();
        }
        const int64_t before = allocator.live_bytes();
        torch::Tensor loss;
        double units = 0;
        if (job.task == Task::kReward) {
          const int64_t n = job.micro_batch;
          const torch::Tensor scores = policy->Scores(b.tokens, b.lengths);
          LossOutput out = BradleyTerryLoss(scores.slice(0, 0, n), scores.slice(0, n));
          loss = out.loss_sum;
          units = static_cast<double>(out.pairs);
        } else if (job.task == Task::kSft) {
          loss = -ResponseLogProbs(policy->TokenLogProbs(b.tokens), b.starts, b.lengths).sum();
          units = static_cast<double>(job.micro_batch);
        } else {
          const int64_t n = job.micro_batch;
          ZF_ASSIGN_OR_RETURN(torch::Tensor ref,
                              reference->ResponseLogProbs(b.tokens, b.starts, b.lengths, b.pair_ids));
          const torch::Tensor pol = ResponseLogProbs(policy->TokenLogProbs(b.tokens), b.starts, b.lengths);
          LossOutput out =
              DpoLoss(pol.slice(0, 0, n), pol.slice(0, n), ref.slice(0, 0, n), ref.slice(0, n), DpoOptions{});
          loss = out.loss_sum;
          units = static_cast<double>(out.pairs);
        }
        if (measured && k == 0) r.forward_saved_bytes = allocator.live_bytes() - before;
        ZF_RETURN_IF_ERROR(binding->Backward(loss, k + 1 == job.accumulation, units));
      }
      ZF_ASSIGN_OR_RETURN(sharding::StepResult step_result, binding->Step());
      (void)step_result;
    }
    ZF_RETURN_IF_ERROR(binding->optimizer().Flush());
    r.torch_peak_bytes = allocator.peak_bytes();
    r.zero2 = binding->optimizer().memory();
    const sharding::Zero2MemoryStats& m = r.zero2;
    r.zero2_device_bytes =
        static_cast<int64_t>(m.flat_param_bytes + m.flat_grad_bytes + m.staging_bytes_peak + m.recv_bytes);
    if (!job.offload)
      r.zero2_device_bytes += static_cast<int64_t>(m.optimizer_state_bytes() + m.shard_grad_bytes);
    r.device_peak_bytes = r.torch_peak_bytes + r.zero2_device_bytes;
    r.host_bytes = static_cast<int64_t>(job.offload ? m.host_state_bytes : 0) +
                   static_cast<int64_t>(reference ? reference->host_bytes() : 0);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("memory probe: ", e.what_without_backtrace()));
  }
  return r;
}

}  // namespace zerofit::worker
