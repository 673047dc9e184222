#include "jobspec/grpo_spec_yaml.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/excerpt.h"

namespace zerofit::jobspec {
namespace {

absl::Status ParseRollout(const YamlReader& r, const YAML::Node& n, RolloutSpec* x) {
  if (!n.IsMap()) return r.Error(n, "rollout", "expected a mapping");
  ZF_RETURN_IF_ERROR(r.OnlyKeys(
      n, "rollout.",
      {"samples_per_prompt", "max_new_tokens", "temperature", "top_p", "top_k", "min_p", "batch", "decode"}));
  ZF_RETURN_IF_ERROR(
      r.Get(n, "samples_per_prompt", "rollout.samples_per_prompt", &x->samples_per_prompt, "an integer"));
  ZF_RETURN_IF_ERROR(r.Get(n, "max_new_tokens", "rollout.max_new_tokens", &x->max_new_tokens, "an integer"));
  ZF_RETURN_IF_ERROR(r.Get(n, "temperature", "rollout.temperature", &x->temperature, "a number"));
  ZF_RETURN_IF_ERROR(r.Get(n, "top_p", "rollout.top_p", &x->top_p, "a number"));
  ZF_RETURN_IF_ERROR(r.Get(n, "top_k", "rollout.top_k", &x->top_k, "an integer"));
  ZF_RETURN_IF_ERROR(r.Get(n, "min_p", "rollout.min_p", &x->min_p, "a number"));
  ZF_RETURN_IF_ERROR(r.Get(n, "batch", "rollout.batch", &x->batch, "an integer"));
  return r.Get(n, "decode", "rollout.decode", &x->decode, "auto, eager, static or cuda_graph");
}

// grpo.reward_clip_range: [min, max], two numbers (TRL's tuple).
absl::Status ParseClipRange(const YamlReader& r, const YAML::Node& n,
                            std::optional<std::pair<double, double>>* out) {
  if (!n.IsDefined() || n.IsNull()) return absl::OkStatus();
  const char* field = "grpo.reward_clip_range";
  if (!n.IsSequence() || n.size() != 2 || !n[0].IsScalar() || !n[1].IsScalar()) {
    return r.Error(n, field, "expected [min, max]");
  }
  try {
    *out = std::pair<double, double>(n[0].as<double>(), n[1].as<double>());
  } catch (const YAML::Exception&) {
    return r.Error(n, field,
                   absl::StrCat("expected [min, max] as numbers, got [", core::QuotedExcerpt(n[0].Scalar()),
                                ", ", core::QuotedExcerpt(n[1].Scalar()), "]"));
  }
  return absl::OkStatus();
}

absl::Status ParseObjective(const YamlReader& r, const YAML::Node& n, GrpoObjectiveSpec* x) {
  if (!n.IsMap()) return r.Error(n, "grpo", "expected a mapping");
  ZF_RETURN_IF_ERROR(
      r.OnlyKeys(n, "grpo.",
                 {"iterations", "beta", "epsilon", "epsilon_high", "loss_type", "scale_rewards",
                  "importance_sampling_level", "delta", "mask_truncated_completions", "top_entropy_quantile",
                  "sapo_temperature_pos", "sapo_temperature_neg", "use_bias_correction_kl",
                  "normalize_advantages", "reward_clip_range"}));
  ZF_RETURN_IF_ERROR(ParseClipRange(r, n["reward_clip_range"], &x->reward_clip_range));
  ZF_RETURN_IF_ERROR(r.Get(n, "iterations", "grpo.iterations", &x->iterations, "an integer"));
  ZF_RETURN_IF_ERROR(r.Get(n, "beta", "grpo.beta", &x->beta, "a number"));
  ZF_RETURN_IF_ERROR(r.Get(n, "epsilon", "grpo.epsilon", &x->epsilon, "a number"));
  ZF_RETURN_IF_ERROR(r.GetOptional(n, "epsilon_high", "grpo.epsilon_high", &x->epsilon_high, "a number"));
  ZF_RETURN_IF_ERROR(r.Get(n, "loss_type", "grpo.loss_type", &x->loss_type, "a GRPO loss type"));
  ZF_RETURN_IF_ERROR(
      r.Get(n, "sapo_temperature_pos", "grpo.sapo_temperature_pos", &x->sapo_temperature_pos, "a number"));
  ZF_RETURN_IF_ERROR(
      r.Get(n, "sapo_temperature_neg", "grpo.sapo_temperature_neg", &x->sapo_temperature_neg, "a number"));
  ZF_RETURN_IF_ERROR(r.Get(n, "scale_rewards", "grpo.scale_rewards", &x->scale_rewards,
                           "group, batch or none (true, false)"));
  ZF_RETURN_IF_ERROR(r.Get(n, "importance_sampling_level", "grpo.importance_sampling_level",
                           &x->importance_sampling_level, "token or sequence"));
  ZF_RETURN_IF_ERROR(r.GetOptional(n, "delta", "grpo.delta", &x->delta, "a number"));
  ZF_RETURN_IF_ERROR(r.Get(n, "mask_truncated_completions", "grpo.mask_truncated_completions",
                           &x->mask_truncated_completions, "true or false"));
  ZF_RETURN_IF_ERROR(
      r.Get(n, "top_entropy_quantile", "grpo.top_entropy_quantile", &x->top_entropy_quantile, "a number"));
  ZF_RETURN_IF_ERROR(r.Get(n, "normalize_advantages", "grpo.normalize_advantages", &x->normalize_advantages,
                           "true or false"));
  return r.Get(n, "use_bias_correction_kl", "grpo.use_bias_correction_kl", &x->use_bias_correction_kl,
               "true or false");
}

absl::Status ParseReward(const YamlReader& r, const YAML::Node& n, const std::string& field, RewardSpec* x) {
  if (!n.IsMap()) return r.Error(n, field, "expected a mapping {type, ...}");
  ZF_RETURN_IF_ERROR(r.OnlyKeys(
      n, field + ".", {"type", "name", "weight", "rule", "pattern", "group", "correct", "wrong", "path"}));
  ZF_RETURN_IF_ERROR(r.Get(n, "type", field + ".type", &x->type, "answer, format or model"));
  ZF_RETURN_IF_ERROR(r.Get(n, "name", field + ".name", &x->name, "a name"));
  ZF_RETURN_IF_ERROR(r.Get(n, "weight", field + ".weight", &x->weight, "a number"));
  ZF_RETURN_IF_ERROR(r.Get(n, "rule", field + ".rule", &x->rule, "exact, last_number or regex"));
  ZF_RETURN_IF_ERROR(r.Get(n, "pattern", field + ".pattern", &x->pattern, "a regular expression"));
  ZF_RETURN_IF_ERROR(r.Get(n, "group", field + ".group", &x->group, "a group number or name"));
  ZF_RETURN_IF_ERROR(r.Get(n, "correct", field + ".correct", &x->correct, "a number"));
  ZF_RETURN_IF_ERROR(r.Get(n, "wrong", field + ".wrong", &x->wrong, "a number"));
  return r.Get(n, "path", field + ".path", &x->path, "a directory");
}

}  // namespace

absl::Status ParseGrpoSections(const YamlReader& r, const YAML::Node& root, const std::string& task,
                               int64_t max_length, GrpoJobSpec* out) {
  for (const char* key : {"rollout", "grpo", "rewards"}) {
    if (root[key].IsDefined() && task != "grpo") {
      return r.Error(root[key], key,
                     absl::StrCat("only task grpo has this section (the task is ", task, ")"));
    }
  }
  if (task != "grpo") return absl::OkStatus();
  if (root["rollout"].IsDefined()) ZF_RETURN_IF_ERROR(ParseRollout(r, root["rollout"], &out->rollout));
  if (root["grpo"].IsDefined()) ZF_RETURN_IF_ERROR(ParseObjective(r, root["grpo"], &out->grpo));
  const YAML::Node rewards = root["rewards"];
  if (rewards.IsDefined() && !rewards.IsSequence())
    return r.Error(rewards, "rewards", "expected a list of reward sources");
  for (size_t i = 0; rewards.IsDefined() && i < rewards.size(); ++i) {
    out->rewards.emplace_back();
    ZF_RETURN_IF_ERROR(ParseReward(r, rewards[i], absl::StrCat("rewards[", i, "]"), &out->rewards.back()));
  }
  return ValidateGrpoJobSpec(out, max_length, [&](const std::string& field, const std::string& why) {
    return r.Error(NodeOf(root, field), field, why);  // without a node: the file, without a line
  });
}

}  // namespace zerofit::jobspec
