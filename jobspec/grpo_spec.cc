#include "jobspec/grpo_spec.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "core/excerpt.h"
#include "core/status_macros.h"
#include "text/regex.h"

namespace zerofit::jobspec {
namespace {

absl::Status ValidateRollout(const RolloutSpec& r, int64_t max_length, const FieldError& bad) {
  if (r.samples_per_prompt < 2) {
    return bad("rollout.samples_per_prompt", "must be >= 2 (advantages are relative to the prompt's group)");
  }
  if (r.max_new_tokens < 1) return bad("rollout.max_new_tokens", "must be >= 1");
  if (r.max_new_tokens >= max_length) {
    return bad("rollout.max_new_tokens",
               absl::StrCat(r.max_new_tokens, " must be less than training.max_length (", max_length,
                            "): the prompt gets the rest"));
  }
  if (!(r.temperature > 0) || !std::isfinite(r.temperature)) {
    return bad("rollout.temperature", "must be > 0 (a group needs diverse samples; evaluation is greedy)");
  }
  if (!(r.top_p > 0 && r.top_p <= 1)) return bad("rollout.top_p", "must be in (0, 1]");
  if (r.top_k < 0) return bad("rollout.top_k", "must be >= 0 (0: every token)");
  if (!(r.min_p >= 0 && r.min_p <= 1)) return bad("rollout.min_p", "must be in [0, 1] (0: no cut)");
  if (r.batch < 0) return bad("rollout.batch", "must be >= 0 (0: a rank's whole step in one pass)");
  if (!IsDecodeMode(r.decode)) return bad("rollout.decode", "must be auto, eager, static or cuda_graph");
  return absl::OkStatus();
}

// loss_type rloo (TRL's RLOOTrainer): its own advantages (leave-one-out), ratio (per completion) and KL (in
// the reward); the options that assume GRPO's are refused by name. normalize_advantages and
// reward_clip_range are RLOO's alone.
absl::Status ValidateRloo(const GrpoObjectiveSpec& g, const FieldError& bad) {
  const GrpoObjectiveSpec d;
  if (g.loss_type != "rloo") {
    if (g.normalize_advantages) return bad("grpo.normalize_advantages", "applies to loss_type rloo only");
    if (g.reward_clip_range) return bad("grpo.reward_clip_range", "applies to loss_type rloo only");
    return absl::OkStatus();
  }
  if (g.reward_clip_range) {
    const auto [lo, hi] = *g.reward_clip_range;
    if (!std::isfinite(lo) || !std::isfinite(hi) || !(lo < hi)) {
      return bad("grpo.reward_clip_range",
                 absl::StrCat("[min, max] must be finite with min < max, got [", lo, ", ", hi, "]"));
    }
  }
  const char* why = nullptr;
  const char* field = nullptr;
  if (g.scale_rewards != d.scale_rewards) {
    field = "grpo.scale_rewards",
    why = "rloo's advantages are leave-one-out; normalize_advantages scales them";
  } else if (g.importance_sampling_level != d.importance_sampling_level) {
    field = "grpo.importance_sampling_level",
    why = "rloo has one ratio per completion (its summed log-ratio)";
  } else if (g.delta) {
    field = "grpo.delta", why = "does not apply to loss_type rloo";
  } else if (g.top_entropy_quantile != d.top_entropy_quantile) {
    field = "grpo.top_entropy_quantile", why = "selects tokens of a per-token loss; rloo's is per completion";
  } else if (g.use_bias_correction_kl) {
    field = "grpo.use_bias_correction_kl", why = "corrects the KL loss term; rloo's KL is in the reward";
  }
  return field == nullptr ? absl::OkStatus() : bad(field, why);
}

absl::Status ValidateObjective(const GrpoObjectiveSpec& g, const FieldError& bad) {
  if (g.iterations < 1) return bad("grpo.iterations", "must be >= 1");
  if (!(g.beta >= 0) || !std::isfinite(g.beta)) return bad("grpo.beta", "must be >= 0");
  if (!(g.epsilon > 0 && g.epsilon < 1)) return bad("grpo.epsilon", "must be in (0, 1)");
  if (g.epsilon_high && !(*g.epsilon_high > 0)) return bad("grpo.epsilon_high", "must be > 0");
  const bool cispo = g.loss_type == "cispo", sapo = g.loss_type == "sapo";
  if (g.loss_type != "grpo" && g.loss_type != "dapo" && g.loss_type != "dr_grpo" && !cispo && !sapo &&
      g.loss_type != "rloo") {
    return bad("grpo.loss_type", absl::StrCat("expected grpo, dapo, dr_grpo, cispo, sapo or rloo, got ",
                                              core::QuotedExcerpt(g.loss_type)));
  }
  if (cispo && !g.epsilon_high) {
    return bad("grpo.epsilon_high",
               "loss_type cispo caps the importance weight at epsilon_high: give it (TRL recommends 5.0)");
  }
  if (g.delta && (cispo || sapo)) {
    return bad("grpo.delta",
               absl::StrCat("caps the clipped term's ratio; loss_type ", g.loss_type, " has none"));
  }
  for (const auto& [name, tau] : {std::pair{"grpo.sapo_temperature_pos", g.sapo_temperature_pos},
                                  std::pair{"grpo.sapo_temperature_neg", g.sapo_temperature_neg}}) {
    if (!(tau > 0) || !std::isfinite(tau)) return bad(name, absl::StrCat("must be > 0, got ", tau));
  }
  if (!sapo && (g.sapo_temperature_pos != GrpoObjectiveSpec{}.sapo_temperature_pos ||
                g.sapo_temperature_neg != GrpoObjectiveSpec{}.sapo_temperature_neg)) {
    return bad(g.sapo_temperature_pos != GrpoObjectiveSpec{}.sapo_temperature_pos
                   ? "grpo.sapo_temperature_pos"
                   : "grpo.sapo_temperature_neg",
               absl::StrCat("applies to loss_type sapo only, not ", g.loss_type));
  }
  if (g.scale_rewards != "group" && g.scale_rewards != "batch" && g.scale_rewards != "none") {
    return bad("grpo.scale_rewards", absl::StrCat("expected group, batch or none (true, false), got ",
                                                  core::QuotedExcerpt(g.scale_rewards)));
  }
  if (g.importance_sampling_level != "token" && g.importance_sampling_level != "sequence") {
    return bad(
        "grpo.importance_sampling_level",
        absl::StrCat("expected token or sequence, got ", core::QuotedExcerpt(g.importance_sampling_level)));
  }
  if (g.delta && !(*g.delta > 1 && std::isfinite(*g.delta))) {
    return bad("grpo.delta",
               "must be > 1 (it caps ratios above the clip range; TRL recommends > 1 + epsilon)");
  }
  if (!(g.top_entropy_quantile > 0 && g.top_entropy_quantile <= 1)) {
    return bad("grpo.top_entropy_quantile",
               absl::StrCat("must be in (0, 1] (1: every token), got ", g.top_entropy_quantile));
  }
  return ValidateRloo(g, bad);
}

// A pattern within the bound that compiles; its Regex.
absl::StatusOr<std::unique_ptr<text::Regex>> CompiledPattern(const RewardSpec& r, const std::string& field,
                                                             const FieldError& bad) {
  if (r.pattern.size() > text::kMaxRulePatternBytes) {
    return bad(field + ".pattern",
               absl::StrCat(r.pattern.size(), " bytes, more than ", text::kMaxRulePatternBytes));
  }
  absl::StatusOr<std::unique_ptr<text::Regex>> re = text::Regex::Compile(r.pattern);
  if (!re.ok()) return bad(field + ".pattern", std::string(re.status().message()));
  return re;
}

// The regex rule's pattern compiles and has the group (checked at submit, not on every rank at start).
absl::Status ValidatePattern(const RewardSpec& r, const std::string& field, const FieldError& bad) {
  if (r.rule != "regex") {
    if (!r.pattern.empty()) return bad(field + ".pattern", "only the regex rule has a pattern");
    if (!r.group.empty()) return bad(field + ".group", "only the regex rule has a group");
    return absl::OkStatus();
  }
  if (r.pattern.empty()) return bad(field + ".pattern", "required for the regex rule");
  ZF_ASSIGN_OR_RETURN(const std::unique_ptr<text::Regex> re, CompiledPattern(r, field, bad));
  if (absl::StatusOr<int> group = re->GroupOf(r.group); !group.ok()) {
    return bad(field + (r.group.empty() ? ".pattern" : ".group"), std::string(group.status().message()));
  }
  return absl::OkStatus();
}

absl::Status ValidateReward(RewardSpec& r, const std::string& field, const FieldError& bad) {
  if (r.type == "answer") {
    if (r.rule != "exact" && r.rule != "last_number" && r.rule != "regex") {
      return bad(field + ".rule",
                 absl::StrCat("expected exact, last_number or regex, got ", core::QuotedExcerpt(r.rule)));
    }
    ZF_RETURN_IF_ERROR(ValidatePattern(r, field, bad));
    if (!r.path.empty()) return bad(field + ".path", "only a reward of type model has a path");
  } else if (r.type == "model") {
    if (r.path.empty()) return bad(field + ".path", "required (a reward model directory zerofit exported)");
  } else if (r.type == "format") {
    if (r.pattern.empty()) return bad(field + ".pattern", "required (what the whole completion must match)");
    ZF_RETURN_IF_ERROR(CompiledPattern(r, field, bad).status());
    if (r.rule != "exact") return bad(field + ".rule", "only a reward of type answer has a rule");
    if (!r.group.empty()) return bad(field + ".group", "only the answer's regex rule has a group");
    if (!r.path.empty()) return bad(field + ".path", "only a reward of type model has a path");
  } else {
    return bad(field + ".type",
               absl::StrCat("expected answer, format or model, got ", core::QuotedExcerpt(r.type)));
  }
  const bool plain = std::all_of(r.name.begin(), r.name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
  if (!plain) return bad(field + ".name", "letters, digits, '_' and '-' only (it names a metric)");
  if (!std::isfinite(r.weight)) return bad(field + ".weight", "must be a finite number");
  if (!std::isfinite(r.correct) || !std::isfinite(r.wrong))
    return bad(field + ".correct", "scores must be finite");
  return absl::OkStatus();
}

}  // namespace

bool IsDecodeMode(const std::string& mode) {
  return mode == "auto" || mode == "eager" || mode == "static" || mode == "cuda_graph";
}

bool DecodesAsGraphOnGpu(const std::string& mode) { return mode == "cuda_graph" || mode == "auto"; }

absl::Status ValidateGrpoJobSpec(GrpoJobSpec* spec, int64_t max_length, const FieldError& bad) {
  ZF_RETURN_IF_ERROR(ValidateRollout(spec->rollout, max_length, bad));
  std::string& scale = spec->grpo.scale_rewards;  // TRL's booleans, as the names they stand for
  if (scale == "true") scale = "group";
  if (scale == "false") scale = "none";
  ZF_RETURN_IF_ERROR(ValidateObjective(spec->grpo, bad));
  if (spec->rewards.empty()) return bad("rewards", "required for task grpo (a list of reward sources)");
  std::map<std::string, int> seen;
  for (size_t i = 0; i < spec->rewards.size(); ++i) {
    RewardSpec& r = spec->rewards[i];
    const std::string field = absl::StrCat("rewards[", i, "]");
    ZF_RETURN_IF_ERROR(ValidateReward(r, field, bad));
    if (r.name.empty()) {
      const int n = ++seen[r.type];
      r.name = n == 1 ? r.type : absl::StrCat(r.type, n);
    }
    for (size_t j = 0; j < i; ++j) {
      if (spec->rewards[j].name == r.name)
        return bad(field + ".name", absl::StrCat("'", r.name, "' is used twice"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateGrpoJobSpec(GrpoJobSpec* spec, int64_t max_length) {
  return ValidateGrpoJobSpec(spec, max_length, [](const std::string& field, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
  });
}

}  // namespace zerofit::jobspec
