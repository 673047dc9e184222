// The objectives' settings in a job spec, each its task's section with TRL's names (the plan carries each to
// the workers unchanged; GRPO's are in grpo_spec.h). DPO, as TRL's DPOConfig names it (beta, loss_type,
// label_smoothing), task dpo only:
//   dpo: {beta: 0.1, loss_type: sigmoid, label_smoothing: 0.0}
// sigmoid is the DPO loss of Rafailov et al. (with label_smoothing > 0: conservative DPO), ipo the IPO loss
// of Azar et al., hinge SLiC's, robust rDPO's (label_smoothing: the assumed share of flipped labels)
// (worker/torch/train/objectives.h). rpo_alpha adds the chosen responses' negative log-likelihood per token
// (RPO; with reference_free and sigmoid, CPO).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "jobspec/grpo_spec.h"

namespace zerofit::jobspec {

struct DpoSpec {
  double beta = 0.1;  // > 0: how far the policy may move from the reference
  // sigmoid | ipo | hinge | robust | exo_pair | nca_pair | sppo_hard | apo_zero | apo_down | discopop |
  // simpo (TRL's CPOTrainer's) | orpo (TRL's ORPOTrainer's, with its NLL term of weight 1); simpo and orpo
  // are reference-free: the job keeps no reference model
  std::string loss_type = "sigmoid";
  double label_smoothing = 0.0;  // sigmoid, robust, exo_pair and simpo, [0, 0.5): the share of flipped labels
  double simpo_gamma = 0.5;      // simpo only: the target reward margin (TRL's CPOConfig default)
  double discopop_tau = 0.05;    // discopop only, > 0: the temperature of its blend (TRL's DPOConfig default)
  // [0, 1], TRL's DPOConfig.ld_alpha (LD-DPO): the policy's log-prob of each response is its first
  // min(chosen, rejected length) tokens' plus ld_alpha times the rest's; 1: plain sums (TRL's None).
  double ld_alpha = 1.0;
  // >= 0: the weight of the chosen responses' negative log-likelihood per token added to the loss (TRL's
  // DPOConfig.rpo_alpha, RPO; with simpo CPOConfig.cpo_alpha); 0: none. Not with orpo, whose weight is 1.
  double rpo_alpha = 0.0;
  // TRL's DPOConfig.reference_free: the reference log-probabilities are 0 (a reference that gives every
  // response the same probability), so the job keeps no reference model. With sigmoid and rpo_alpha 1 this
  // is CPO (TRL's CPOTrainer's default).
  bool reference_free = false;
};

// Whether the DPO job compares against no reference model: simpo, orpo or reference_free.
bool DpoIsReferenceFree(const DpoSpec& dpo);

// Ranges and names; errors through `bad("dpo.beta", why)` (grpo_spec.h's FieldError).
absl::Status ValidateDpoSpec(const DpoSpec& dpo, const FieldError& bad);

// The reward model's loss beyond Bradley-Terry, as TRL's RewardConfig names it, task reward only:
//   reward: {center_rewards_coefficient: 0.01}
// adds coefficient x (r_chosen + r_rejected)^2 per pair (Eisenstein et al.: scores centred on 0, so that
// rewards of different models and runs compare). (A pair's required score gap is data: its "margin".)
struct RewardLossSpec {
  double center_rewards_coefficient = 0;  // >= 0, finite; 0: none
};

absl::Status ValidateRewardLossSpec(const RewardLossSpec& reward, const FieldError& bad);

// SFT, as TRL's SFTConfig names it, task sft only:
//   sft: {completion_only_loss: false, assistant_only_loss: true}
// completion_only_loss true (the default, TRL's for prompt-completion data): the loss scores a
// prompt-completion example's completion alone; false: its prompt too (then every token after the first, as
// for text and messages lines, which have no prompt; worker/data/sft_example.h). assistant_only_loss true
// (default false, as in TRL): only the assistant's messages of conversational examples are scored, and every
// example must be conversational (worker/data/chat_turns.h).
struct SftSpec {
  bool completion_only_loss = true;
  bool assistant_only_loss = false;
};

}  // namespace zerofit::jobspec
