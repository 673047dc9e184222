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

// The micro-batch of pairs `ids`; SFT keeps the chosen rows only (micro_batch sequences).
absl::StatusOr<PairTensors> ProbeBatch(const ProbeJob& job, const std::vector<data::PreferencePair>& pairs,
                                       const std::vector<uint64_t>& ids, const core::HfModelConfig& config) {
  ZF_ASSIGN_OR_RETURN(PairTensors b, MakePairTensors(pairs, ids, BatchPadId(config)));
  if (job.task == Task::kSft) {
    const int64_t n = job.micro_batch;
    b.tokens = b.tokens.slice(0, 0, n).contiguous();
    b.starts = b.starts.slice(0, 0, n).contiguous();
    b.lengths = b.lengths.slice(0, 0, n).contiguous();
  }
  return b;
}

// The task's loss on one micro-batch (the trainer's objectives) and the units it averages over; nothing else
// stays alive (the metrics tensor would count as saved activations).
struct ProbeLossValue {
  torch::Tensor loss;
  double units = 0;
};

absl::StatusOr<LossOutput> ProbeLossOutput(const ProbeJob& job, LlamaModel& policy, ReferenceModel* reference,
                                           const PairTensors& b) {
  const int64_t n = job.micro_batch;
  if (job.task == Task::kReward) {
    const torch::Tensor scores = policy->Scores(b.tokens, b.lengths);
    return BradleyTerryLoss(scores.slice(0, 0, n), scores.slice(0, n));
  }
  torch::Tensor ref;  // DPO: the reference first, as the trainer runs it (the peak depends on the order)
  if (job.task == Task::kDpo) {
    ZF_ASSIGN_OR_RETURN(ref, reference->ResponseLogProbs(b.tokens, b.starts, b.lengths, b.pair_ids));
  }
  const torch::Tensor pol = ResponseLogProbs(policy->TokenLogProbs(b.tokens), b.starts, b.lengths);
  if (job.task == Task::kSft) {
    LossOutput out;
    out.loss_sum = -pol.sum();
    out.pairs = n;
    return out;
  }
  return DpoLoss(pol.slice(0, 0, n), pol.slice(0, n), ref.slice(0, 0, n), ref.slice(0, n), DpoOptions{});
}

absl::StatusOr<ProbeLossValue> ProbeLoss(const ProbeJob& job, LlamaModel& policy, ReferenceModel* reference,
                                         const PairTensors& b) {
  ZF_ASSIGN_OR_RETURN(LossOutput out, ProbeLossOutput(job, policy, reference, b));
  return ProbeLossValue{std::move(out.loss_sum), static_cast<double>(out.pairs)};
}

// The frozen DPO reference (none for the other tasks), its log-probs precomputed where the strategy says so.
absl::StatusOr<std::unique_ptr<ReferenceModel>> ProbeReference(const ProbeJob& job,
                                                               const core::HfModelConfig& config,
                                                               const LlamaOptions& policy_options,
                                                               const std::vector<data::PreferencePair>& pairs,
                                                               comm::Communicator* comm) {
  if (job.task != Task::kDpo) return std::unique_ptr<ReferenceModel>();
  torch::manual_seed(job.seed);
  LlamaOptions ref_options;
  ref_options.dtype = policy_options.dtype;
  ZF_ASSIGN_OR_RETURN(LlamaModel ref_model, MakeLlamaModel(config, ref_options));
  ZF_ASSIGN_OR_RETURN(auto reference, ReferenceModel::Create(std::move(ref_model), job.reference));
  ZF_RETURN_IF_ERROR(reference->Precompute(pairs, 0, job.micro_batch, comm));
  return reference;
}

// The optimizer's bytes outside torch's allocator: device (flat parameters and gradients, buckets, and the
// state and gradient shard unless offloaded) and host (offloaded state, the reference's host copy).
void AddZero2Bytes(const ProbeJob& job, const sharding::Zero2MemoryStats& m, const ReferenceModel* reference,
                   ProbeResult* r) {
  r->zero2 = m;
  r->zero2_device_bytes =
      static_cast<int64_t>(m.flat_param_bytes + m.flat_grad_bytes + m.staging_bytes_peak + m.recv_bytes);
  if (!job.offload)
    r->zero2_device_bytes += static_cast<int64_t>(m.optimizer_state_bytes() + m.shard_grad_bytes);
  r->device_peak_bytes = r->torch_peak_bytes + r->zero2_device_bytes;
  r->host_bytes = static_cast<int64_t>(job.offload ? m.host_state_bytes : 0) +
                  static_cast<int64_t>(reference ? reference->host_bytes() : 0);
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
    const std::vector<data::PreferencePair> pairs =
        SyntheticPairs(job.micro_batch * job.accumulation * job.steps, job.seq_len, config.vocab_size,
                       job.seed + comm->rank());
    ZF_ASSIGN_OR_RETURN(std::unique_ptr<ReferenceModel> reference,
                        ProbeReference(job, config, mo, pairs, comm));
    sharding::Zero2Options zo;
    zo.bucket_bytes = job.bucket_bytes;
    zo.offload.enabled = job.offload;
    zo.max_grad_norm = 1.0f;
    zo.param_dtype = job.bf16 ? core::DType::kBFloat16 : core::DType::kFloat32;
    ZF_ASSIGN_OR_RETURN(auto binding, Zero2Binding::Bind(*policy, zo, comm));
    uint64_t next_pair = 0;
    for (int step = 0; step < job.steps; ++step) {
      const bool measured = step + 1 == job.steps;
      if (measured) {
        r.torch_static_bytes = allocator.live_bytes();
        allocator.ResetPeak();
      }
      for (int k = 0; k < job.accumulation; ++k) {
        std::vector<uint64_t> ids(static_cast<size_t>(job.micro_batch));
        for (uint64_t& id : ids) id = next_pair++;
        ZF_ASSIGN_OR_RETURN(const PairTensors b, ProbeBatch(job, pairs, ids, config));
        const int64_t before = allocator.live_bytes();
        ZF_ASSIGN_OR_RETURN(const ProbeLossValue out, ProbeLoss(job, policy, reference.get(), b));
        if (measured && k == 0) r.forward_saved_bytes = allocator.live_bytes() - before;
        ZF_RETURN_IF_ERROR(binding->Backward(out.loss, k + 1 == job.accumulation, out.units));
      }
      ZF_RETURN_IF_ERROR(binding->Step(1e-3f).status());  // the rate does not change memory
    }
    ZF_RETURN_IF_ERROR(binding->optimizer().Flush());
    r.torch_peak_bytes = allocator.peak_bytes();
    AddZero2Bytes(job, binding->optimizer().memory(), reference.get(), &r);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("memory probe: ", e.what_without_backtrace()));
  }
  return r;
}

}  // namespace zerofit::worker
