#include "worker/torch/train/micro_batch_loss.h"

#include "core/status_macros.h"
#include "worker/torch/train/host_to_device.h"

namespace zerofit::worker {
namespace {

using Task = PreferenceTrainOptions::Task;

}  // namespace

PairTensors OnDevice(PairTensors b, const torch::Device& device) {
  b.tokens = HostToDevice(b.tokens, device);
  b.starts = HostToDevice(b.starts, device);
  b.lengths = HostToDevice(b.lengths, device);
  b.readout = HostToDevice(b.readout, device);
  b.margins = HostToDevice(b.margins, device);
  b.scored = HostToDevice(b.scored, device);
  return b;
}

absl::StatusOr<LossOutput> MicroBatchLoss(LlamaModel& policy, ReferenceModel* reference,
                                          const PreferenceTrainOptions& o, const PairTensors& b) {
  const auto n = static_cast<int64_t>(b.pair_ids.size());  // pairs (SFT: examples, one row each)
  LossOutput out;
  if (o.task == Task::kReward) {
    if (!b.readout.defined()) {
      return absl::FailedPreconditionError(
          "a reward-model batch needs its read-out positions (MakePairTensors with "
          "BatchFormat.reward_readout)");
    }
    const torch::Tensor scores = policy->ScoresAt(b.tokens, b.readout);
    out =
        BradleyTerryLoss(scores.slice(0, 0, n), scores.slice(0, n), b.margins, o.center_rewards_coefficient);
  } else {
    const bool sft = o.task == Task::kSft;
    torch::Tensor top;  // SFT: log p of the most likely token at each position, for the token accuracy
    const torch::Tensor token_logp = policy->TokenLogProbs(b.tokens, b.head_from, sft ? &top : nullptr);
    const torch::Tensor pol = ResponseLogProbs(token_logp, b.starts, b.lengths, b.head_from, b.scored);
    if (sft) {
      if (b.tokens.size(0) != n) {
        return absl::FailedPreconditionError(
            "an SFT batch holds the completions alone (MakePairTensors with PairRows::kChosenOnly)");
      }
      torch::Tensor hits;
      {
        torch::NoGradGuard no_grad;  // a prediction is right where its token's log p is the top one
        hits = ResponseLogProbs((token_logp >= top).to(torch::kFloat32), b.starts, b.lengths, b.head_from,
                                b.scored);
      }
      // The tokens scored, counted on the host where the batch was built (the optimizer's units too).
      const torch::Tensor tokens =
          torch::full({}, static_cast<double>(b.scored_tokens), pol.options().dtype(torch::kFloat64));
      out = SftLoss(pol, tokens, hits);
    } else {
      // ref stays undefined for a reference-free loss (SimPO, ORPO); LD-DPO weighs the policy's tail alone.
      torch::Tensor ref, policy_logps = o.dpo.ld_alpha == 1.0
                                            ? pol
                                            : LengthDesensitizedLogProbs(token_logp, b.starts, b.lengths,
                                                                         b.head_from, o.dpo.ld_alpha);
      if (DpoNeedsReference(o.dpo)) {
        if (reference == nullptr) return absl::FailedPreconditionError("DPO needs a reference model");
        ZF_ASSIGN_OR_RETURN(
            ref, reference->ResponseLogProbs(b.tokens, b.starts, b.lengths, b.pair_ids, b.head_from));
      }
      if (DpoLossIsPerToken(o.dpo.loss)) {  // TRL's IPO, SimPO: each response's mean log-prob per token
        const torch::Tensor tokens = (b.lengths - b.starts).clamp_min(1).to(pol.dtype());
        policy_logps = pol / tokens;
        if (ref.defined()) ref = ref / tokens.to(ref.device(), ref.scalar_type());
      }
      auto half = [n](const torch::Tensor& t, bool chosen) {
        return !t.defined() ? t : chosen ? t.slice(0, 0, n) : t.slice(0, n);
      };
      out = DpoLoss(half(policy_logps, true), half(policy_logps, false), half(ref, true), half(ref, false),
                    o.dpo);
      AddChosenNll(half(pol, true), b.scored_tokens, DpoNllWeight(o.dpo), &out);
    }
  }
  out.units = o.task == Task::kSft ? static_cast<double>(b.scored_tokens) : static_cast<double>(out.pairs);
  torch::NoGradGuard no_grad;
  out.metrics.select(0, pair_metric::kSequenceTokens).add_(b.lengths.sum().to(torch::kFloat64));
  return out;
}

absl::StatusOr<torch::Tensor> EvaluateChunks(LlamaModel& policy, ReferenceModel* reference,
                                             const std::vector<data::PreferencePair>& pairs,
                                             const std::vector<std::vector<uint64_t>>& chunks,
                                             const BatchFormat& format, const PreferenceTrainOptions& o,
                                             const torch::Device& device) {
  torch::NoGradGuard no_grad;
  torch::Tensor sum = ZeroPairMetrics(device);
  for (const std::vector<uint64_t>& ids : chunks) {
    ZF_ASSIGN_OR_RETURN(PairTensors host, MakePairTensors(pairs, ids, format));
    const PairTensors b = OnDevice(std::move(host), device);
    ZF_ASSIGN_OR_RETURN(LossOutput out, MicroBatchLoss(policy, reference, o, b));
    sum += out.metrics;
  }
  return sum;
}

}  // namespace zerofit::worker
