#include "worker/torch/train/plan_options.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace zerofit::worker {

absl::StatusOr<GrpoTaskOptions> GrpoTaskOptionsOf(const jobspec::GrpoJobSpec& g) {
  GrpoTaskOptions o;
  o.rollout.samples_per_prompt = g.rollout.samples_per_prompt;
  o.rollout.max_new_tokens = g.rollout.max_new_tokens;
  o.rollout.temperature = g.rollout.temperature;
  o.rollout.top_p = g.rollout.top_p;
  o.rollout.top_k = g.rollout.top_k;
  o.rollout.min_p = g.rollout.min_p;
  o.rollout.rollout_batch = g.rollout.batch;
  ZF_ASSIGN_OR_RETURN(o.rollout.decode, ParseDecodeMode(g.rollout.decode, "rollout.decode"));
  o.iterations = g.grpo.iterations;
  o.objective.beta = g.grpo.beta;
  o.objective.epsilon_low = g.grpo.epsilon;
  o.objective.epsilon_high = g.grpo.epsilon_high.value_or(g.grpo.epsilon);
  ZF_ASSIGN_OR_RETURN(o.objective.norm, ParseGrpoLossNorm(g.grpo.loss_type));
  ZF_ASSIGN_OR_RETURN(o.objective.term, ParseGrpoPolicyTerm(g.grpo.loss_type));
  o.objective.sapo_temperature_pos = g.grpo.sapo_temperature_pos;
  o.objective.sapo_temperature_neg = g.grpo.sapo_temperature_neg;
  o.objective.bias_correction_kl = g.grpo.use_bias_correction_kl;
  ZF_ASSIGN_OR_RETURN(o.objective.scale, ParseRewardScale(g.grpo.scale_rewards));
  o.objective.sequence_ratio = g.grpo.importance_sampling_level == "sequence";
  o.objective.delta = g.grpo.delta;
  o.objective.rloo = IsRloo(g.grpo.loss_type);
  o.objective.normalize_advantages = g.grpo.normalize_advantages;
  o.objective.reward_clip_range = g.grpo.reward_clip_range;
  o.mask_truncated_completions = g.grpo.mask_truncated_completions;
  o.top_entropy_quantile = g.grpo.top_entropy_quantile;
  o.objective.max_new_tokens = g.rollout.max_new_tokens;
  for (size_t i = 0; i < g.rewards.size(); ++i) {
    const jobspec::RewardSpec& r = g.rewards[i];
    RewardSourceOptions src;
    src.kind = r.type == "model"    ? RewardSourceOptions::Kind::kModel
               : r.type == "format" ? RewardSourceOptions::Kind::kFormat
                                    : RewardSourceOptions::Kind::kAnswer;
    src.name = r.name;
    src.weight = r.weight;
    src.model_dir = r.path;
    if (src.kind == RewardSourceOptions::Kind::kFormat) src.format = {r.pattern, r.correct, r.wrong};
    if (src.kind == RewardSourceOptions::Kind::kAnswer) {
      ZF_ASSIGN_OR_RETURN(src.answer.rule,
                          rewards::ParseAnswerRule(r.rule, absl::StrCat("rewards[", i, "].rule")));
      src.answer.pattern = r.pattern;
      src.answer.group = r.group;
      src.answer.correct = r.correct;
      src.answer.wrong = r.wrong;
    }
    o.rewards.push_back(std::move(src));
  }
  return o;
}

std::string InitWeightsOf(const jobspec::JobPlan& plan) {
  namespace fs = std::filesystem;
  if (!plan.init.empty()) return plan.init;
  if (fs::exists(fs::path(plan.model) / "model.safetensors") ||
      fs::exists(fs::path(plan.model) / "model.safetensors.index.json")) {
    return plan.model;
  }
  return "";
}

absl::StatusOr<DpoOptions> DpoOptionsOf(const jobspec::DpoSpec& spec) {
  DpoOptions o;
  ZF_ASSIGN_OR_RETURN(o.loss, ParseDpoLoss(spec.loss_type));
  o.beta = spec.beta;
  o.label_smoothing = spec.label_smoothing;
  o.simpo_gamma = spec.simpo_gamma;
  o.discopop_tau = spec.discopop_tau;
  o.ld_alpha = spec.ld_alpha;
  o.rpo_alpha = spec.rpo_alpha;
  o.reference_free = spec.reference_free;
  return o;
}

absl::StatusOr<PreferenceTrainOptions> OptionsFromPlan(const jobspec::JobPlan& plan) {
  PreferenceTrainOptions o;
  ZF_ASSIGN_OR_RETURN(o.task, ParseTask(plan.task));
  o.model_dir = plan.model;
  o.init_weights = InitWeightsOf(plan);
  o.seed = static_cast<uint64_t>(plan.seed);
  o.data = data::DataSourceOf(plan);
  ZF_ASSIGN_OR_RETURN(o.data.add_bos, data::ParseAddBos(plan.data.add_bos, "data.add_bos"));
  o.data.completion_only_loss = plan.sft.completion_only_loss;
  o.data.assistant_only_loss = plan.sft.assistant_only_loss;
  o.eval_every = plan.eval.every;
  o.eval_max_samples = plan.eval.max_samples;
  o.steps = plan.steps;
  o.global_batch = plan.global_batch;
  o.gradient_accumulation = plan.gradient_accumulation;
  o.schedule = plan.schedule;
  o.weight_decay = static_cast<float>(plan.weight_decay);
  o.max_grad_norm = static_cast<float>(plan.max_grad_norm);
  o.offload = plan.offload;
  o.delayed_update_from = plan.delayed_update_from;
  if (plan.optimizer.eight_bit()) o.moments.format = optim::MomentFormat::kBlockwise8bit;
  o.moments.min_8bit_size = static_cast<size_t>(plan.optimizer.min_8bit_size);
  o.model.activation_checkpointing = plan.activation_checkpointing;
  o.model.dtype = plan.bf16 ? torch::kBFloat16 : torch::kFloat32;
  o.model.lora.rank = plan.lora.rank;
  o.model.lora.alpha = plan.lora.alpha;
  o.model.lora.dropout = plan.lora.dropout;
  o.model.lora.target_modules = plan.lora.target_modules;
  if (plan.reference != "none") {
    ZF_ASSIGN_OR_RETURN(o.reference, ParseReferenceStrategy(plan.reference));
  }
  o.max_length = plan.max_length;
  o.export_dir = plan.export_dir;
  ZF_ASSIGN_OR_RETURN(o.device, device::ParseDeviceChoice(plan.device));
  if (o.task == PreferenceTrainOptions::Task::kDpo) {
    ZF_ASSIGN_OR_RETURN(o.dpo, DpoOptionsOf(plan.dpo));
  }
  if (o.task == PreferenceTrainOptions::Task::kReward) {
    o.center_rewards_coefficient = plan.reward.center_rewards_coefficient;
  }
  if (o.task == PreferenceTrainOptions::Task::kGrpo) {
    ZF_ASSIGN_OR_RETURN(o.grpo, GrpoTaskOptionsOf(plan.grpo));
  }
  return o;
}

}  // namespace zerofit::worker
