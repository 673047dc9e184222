#include "worker/torch/train/memory_probe.h"

#include <torch/torch.h>

#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "worker/torch/model/generation.h"
#include "worker/torch/model/llama_model.h"
#include "worker/torch/train/grpo_objective.h"
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
    case ReferenceStrategy::kLoraBase:
      return planner::Reference::kLoraBase;
  }
  return planner::Reference::kNone;
}

namespace {

using planner::Task;

// The probe measures the bytes of the tensors a training step makes, which the planner predicts for a GPU.
// On a CPU with AVX-512 LibTorch sends bf16 matrix products to oneDNN, whose reordered operands and scratch
// come from the same CPU allocator (about 45 KB above the prediction in a bf16 GRPO prefill, 6% of the
// planner's GRPO terms on a Zen 4 EPYC): a CPU kernel's working memory that cuBLAS does not have. With
// oneDNN off for the measurement, bf16 products take LibTorch's own kernels, as they do on CPUs without
// AVX-512, and every CPU measures the same tensors. Restores the previous setting on exit.
class OneDnnOffForMeasurement {
 public:
  OneDnnOffForMeasurement() : was_(at::globalContext().userEnabledMkldnn()) {
    at::globalContext().setUserEnabledMkldnn(false);
  }
  ~OneDnnOffForMeasurement() { at::globalContext().setUserEnabledMkldnn(was_); }
  OneDnnOffForMeasurement(const OneDnnOffForMeasurement&) = delete;
  OneDnnOffForMeasurement& operator=(const OneDnnOffForMeasurement&) = delete;

 private:
  bool was_;
};

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

// The micro-batch of pairs `ids`, built as the trainer builds it: SFT's holds the chosen rows alone
// (micro_batch sequences).
absl::StatusOr<PairTensors> ProbeBatch(const ProbeJob& job, const std::vector<data::PreferencePair>& pairs,
                                       const std::vector<uint64_t>& ids, const core::HfModelConfig& config) {
  BatchFormat format = BatchFormatOf(config, job.task == Task::kReward);
  if (job.task == Task::kSft) format.rows = data::PairRows::kChosenOnly;
  return MakePairTensors(pairs, ids, format);
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
    const torch::Tensor scores = policy->ScoresAt(b.tokens, b.readout);
    return BradleyTerryLoss(scores.slice(0, 0, n), scores.slice(0, n));
  }
  torch::Tensor ref;  // DPO: the reference first, as the trainer runs it (the peak depends on the order)
  if (job.task == Task::kDpo) {
    ZF_ASSIGN_OR_RETURN(ref, reference->ResponseLogProbs(b.tokens, b.starts, b.lengths, b.pair_ids));
  }
  const torch::Tensor pol = ResponseLogProbs(policy->TokenLogProbs(b.tokens), b.starts, b.lengths);
  if (job.task == Task::kSft) return SftLoss(pol, b.lengths - b.starts);
  return DpoLoss(pol.slice(0, 0, n), pol.slice(0, n), ref.slice(0, 0, n), ref.slice(0, n), DpoOptions{});
}

absl::StatusOr<ProbeLossValue> ProbeLoss(const ProbeJob& job, LlamaModel& policy, ReferenceModel* reference,
                                         const PairTensors& b) {
  ZF_ASSIGN_OR_RETURN(LossOutput out, ProbeLossOutput(job, policy, reference, b));
  return ProbeLossValue{std::move(out.loss_sum), static_cast<double>(out.pairs)};
}

// The frozen DPO reference (none for the other tasks), its log-probs precomputed where the strategy says so;
// lora-base is `policy` itself.
absl::StatusOr<std::unique_ptr<ReferenceModel>> ProbeReference(const ProbeJob& job, const LlamaModel& policy,
                                                               const LlamaOptions& policy_options,
                                                               const std::vector<data::PreferencePair>& pairs,
                                                               comm::Communicator* comm) {
  if (job.task != Task::kDpo) return std::unique_ptr<ReferenceModel>();
  if (job.reference == ReferenceStrategy::kLoraBase) return ReferenceModel::Create(policy, job.reference);
  const core::HfModelConfig& config = policy->config();
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

// The policy's options and the optimizer's, as the trainers build them from the job.
LlamaOptions ProbeModelOptions(const ProbeJob& job) {
  LlamaOptions mo;
  mo.activation_checkpointing = job.checkpointing;
  mo.lean_pieces = !job.plain_pieces;
  mo.fused_kernels = job.fused_kernels;
  mo.reward_head = job.task == Task::kReward;
  mo.lora.rank = job.lora_rank;
  mo.dtype = job.bf16 ? torch::kBFloat16 : torch::kFloat32;
  return mo;
}

sharding::Zero2Options ProbeZero2Options(const ProbeJob& job) {
  sharding::Zero2Options zo;
  zo.bucket_bytes = job.bucket_bytes;
  zo.offload.enabled = job.offload;
  zo.max_grad_norm = 1.0f;
  zo.param_dtype = job.bf16 ? core::DType::kBFloat16 : core::DType::kFloat32;
  zo.micro_batches_per_step = job.task == planner::Task::kGrpo ? 0 : job.gradient_accumulation;
  if (job.eight_bit) zo.moments.format = optim::MomentFormat::kBlockwise8bit;
  return zo;
}

// GRPO's rollout prompts: rollout_prompts random prompts of prompt_len tokens, each samples_per_prompt
// times in a row (a group), all in one generation pass.
std::vector<std::vector<int64_t>> GrpoPrompts(const ProbeJob& job, int64_t vocab, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t p = 0; p < job.rollout_prompts; ++p) {
    std::vector<int64_t> prompt(static_cast<size_t>(job.prompt_len));
    for (int64_t& t : prompt) t = static_cast<int64_t>(1 + gen() % static_cast<uint64_t>(vocab - 1));
    for (int64_t g = 0; g < job.samples_per_prompt; ++g) prompts.push_back(prompt);
  }
  return prompts;
}

absl::StatusOr<GenerationResult> GrpoGenerate(const ProbeJob& job, LlamaModel& policy,
                                              const std::vector<std::vector<int64_t>>& prompts,
                                              uint64_t seed) {
  GenerationOptions o;
  o.max_new_tokens = job.new_tokens;
  o.temperature = 1.0;  // eos_ids empty: every completion runs to max_new_tokens
  o.seed = seed;
  o.max_batch = static_cast<int64_t>(prompts.size());
  return Generate(*policy, prompts, o);  // the cache is local: freed before the training pass
}

// The training micro-batch: prompt + completion of the rollout's first micro_batch sequences (cycling),
// [micro_batch, prompt_len + new_tokens] int64.
torch::Tensor GrpoRows(const ProbeJob& job, const std::vector<std::vector<int64_t>>& prompts,
                       const GenerationResult& rollout) {
  torch::Tensor rows = torch::empty({job.micro_batch, job.prompt_len + job.new_tokens}, torch::kInt64);
  auto at = rows.accessor<int64_t, 2>();
  for (int64_t r = 0; r < job.micro_batch; ++r) {
    const size_t i = static_cast<size_t>(r) % prompts.size();
    std::vector<int64_t> seq = prompts[i];
    seq.insert(seq.end(), rollout.completions[i].tokens.begin(), rollout.completions[i].tokens.end());
    for (size_t j = 0; j < seq.size(); ++j) at[r][static_cast<int64_t>(j)] = seq[j];
  }
  return rows;
}

// One GRPO micro-batch as a trainer runs it: the old log-probs (a no-grad policy forward), the reference's
// (with beta > 0), then the policy's forward, GrpoPolicyLoss and backward. The head covers the completion
// positions only (TokenLogProbs from prompt_len - 1).
absl::Status GrpoTrainingPass(const ProbeJob& job, LlamaModel& policy, LlamaModel* reference,
                              Zero2Binding& binding, const torch::Tensor& rows) {
  const int64_t from = job.prompt_len - 1;
  torch::Tensor old_logp, ref_logp;
  {
    torch::NoGradGuard no_grad;
    old_logp = policy->TokenLogProbs(rows, from);
    if (reference != nullptr) {
      std::optional<AdaptersOff> base;
      if (job.reference == ReferenceStrategy::kLoraBase) base.emplace(**reference);
      ref_logp = (*reference)->TokenLogProbs(rows, from);
    }
  }
  const torch::Tensor mask = torch::ones_like(old_logp);
  const torch::Tensor advantages = torch::randn({job.micro_batch});
  GrpoOptions o;
  o.beta = job.grpo_beta;
  const torch::Tensor logp = policy->TokenLogProbs(rows, from);
  ZF_ASSIGN_OR_RETURN(GrpoLoss loss, GrpoPolicyLoss(logp, old_logp, ref_logp, mask, advantages, o));
  return binding.Backward(loss.loss_sum, /*last_of_step=*/true, loss.units);
}

// GRPO's frozen reference (grpo_beta > 0), resident: a copy of the initial policy without gradients; or
// lora-base: a handle of `policy` itself (GrpoTrainingPass disables its adapters).
absl::StatusOr<std::unique_ptr<LlamaModel>> GrpoReference(const ProbeJob& job, const LlamaModel& policy,
                                                          const LlamaOptions& policy_options) {
  if (job.grpo_beta <= 0) return std::unique_ptr<LlamaModel>();
  if (job.reference == ReferenceStrategy::kLoraBase) return std::make_unique<LlamaModel>(policy);
  const core::HfModelConfig& config = policy->config();
  torch::manual_seed(job.seed);
  LlamaOptions ref_options;
  ref_options.dtype = policy_options.dtype;
  ZF_ASSIGN_OR_RETURN(LlamaModel ref, MakeLlamaModel(config, ref_options));
  for (torch::Tensor& p : ref->parameters()) p.set_requires_grad(false);
  return std::make_unique<LlamaModel>(std::move(ref));
}

absl::Status CheckGrpoJob(const ProbeJob& job) {
  if (job.micro_batch < 1 || job.prompt_len < 1 || job.new_tokens < 1 || job.samples_per_prompt < 1 ||
      job.rollout_prompts < 1 || job.steps < 1) {
    return absl::InvalidArgumentError(
        "ProbeJob (grpo): micro_batch, prompt_len, new_tokens, samples_per_prompt, rollout_prompts and steps "
        "must be >= 1");
  }
  return absl::OkStatus();
}

// MeasureTrainingPeak for task grpo: each step's generation pass then training pass; the last step's two
// peaks are reported separately.
absl::StatusOr<ProbeResult> MeasureGrpoPeaks(const ProbeJob& job, comm::Communicator* comm) {
  ZF_RETURN_IF_ERROR(CheckGrpoJob(job));
  TrackingAllocator allocator;
  ProbeResult r;
  try {
    ScopedTrackingAllocator scope(&allocator);
    OneDnnOffForMeasurement native_kernels;
    torch::manual_seed(job.seed);
    const LlamaOptions mo = ProbeModelOptions(job);
    ZF_ASSIGN_OR_RETURN(LlamaModel policy, MakeLlamaModel(job.model, mo));
    ZF_ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> reference, GrpoReference(job, policy, mo));
    ZF_ASSIGN_OR_RETURN(auto binding, Zero2Binding::Bind(*policy, ProbeZero2Options(job), comm));
    const uint64_t seed = job.seed + comm->rank();
    const std::vector<std::vector<int64_t>> prompts = GrpoPrompts(job, job.model.vocab_size, seed);
    for (int step = 0; step < job.steps; ++step) {
      r.generation_static_bytes = allocator.live_bytes();
      allocator.ResetPeak();
      ZF_ASSIGN_OR_RETURN(const GenerationResult rollout, GrpoGenerate(job, policy, prompts, seed + step));
      r.generation_torch_peak_bytes = allocator.peak_bytes();
      r.kv_cache_bytes = rollout.stats.peak_cache_bytes;
      const torch::Tensor rows = GrpoRows(job, prompts, rollout);
      r.torch_static_bytes = allocator.live_bytes();
      allocator.ResetPeak();
      ZF_RETURN_IF_ERROR(GrpoTrainingPass(job, policy, reference.get(), *binding, rows));
      ZF_RETURN_IF_ERROR(binding->Step(1e-3f).status());
    }
    ZF_RETURN_IF_ERROR(binding->optimizer().Flush());
    r.torch_peak_bytes = allocator.peak_bytes();
    AddZero2Bytes(job, binding->optimizer().memory(), nullptr, &r);
    r.generation_peak_bytes = r.generation_torch_peak_bytes + r.zero2_device_bytes;
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("memory probe (grpo): ", e.what_without_backtrace()));
  }
  return r;
}

}  // namespace

absl::StatusOr<ProbeResult> MeasureTrainingPeak(const ProbeJob& job, comm::Communicator* comm) {
  if (job.task == Task::kGrpo) return MeasureGrpoPeaks(job, comm);
  if (job.micro_batch < 1 || job.seq_len < 2 || job.gradient_accumulation < 1 || job.steps < 1) {
    return absl::InvalidArgumentError(
        "ProbeJob: micro_batch >= 1, seq_len >= 2, accumulation >= 1, steps >= 1");
  }
  TrackingAllocator allocator;
  ProbeResult r;
  try {
    ScopedTrackingAllocator scope(&allocator);
    OneDnnOffForMeasurement native_kernels;
    torch::manual_seed(job.seed);
    const LlamaOptions mo = ProbeModelOptions(job);
    core::HfModelConfig config = job.model;
    if (mo.reward_head) config.num_labels = 1;
    ZF_ASSIGN_OR_RETURN(LlamaModel policy, MakeLlamaModel(config, mo));
    const std::vector<data::PreferencePair> pairs =
        SyntheticPairs(job.micro_batch * job.gradient_accumulation * job.steps, job.seq_len,
                       config.vocab_size, job.seed + comm->rank());
    ZF_ASSIGN_OR_RETURN(std::unique_ptr<ReferenceModel> reference,
                        ProbeReference(job, policy, mo, pairs, comm));
    ZF_ASSIGN_OR_RETURN(auto binding, Zero2Binding::Bind(*policy, ProbeZero2Options(job), comm));
    uint64_t next_pair = 0;
    for (int step = 0; step < job.steps; ++step) {
      const bool measured = step + 1 == job.steps;
      if (measured) {
        r.torch_static_bytes = allocator.live_bytes();
        allocator.ResetPeak();
      }
      for (int k = 0; k < job.gradient_accumulation; ++k) {
        std::vector<uint64_t> ids(static_cast<size_t>(job.micro_batch));
        for (uint64_t& id : ids) id = next_pair++;
        ZF_ASSIGN_OR_RETURN(const PairTensors b, ProbeBatch(job, pairs, ids, config));
        const int64_t before = allocator.live_bytes();
        ZF_ASSIGN_OR_RETURN(const ProbeLossValue out, ProbeLoss(job, policy, reference.get(), b));
        if (measured && k == 0) r.forward_saved_bytes = allocator.live_bytes() - before;
        ZF_RETURN_IF_ERROR(binding->Backward(out.loss, k + 1 == job.gradient_accumulation, out.units));
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
