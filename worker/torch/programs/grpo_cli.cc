#include "worker/torch/programs/grpo_cli.h"

#include <cstdio>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "core/status_macros.h"
#include "worker/torch/train/grpo_session.h"

namespace zerofit::worker {
namespace {

namespace names = metrics::metric_names;

double ValueOr(const metrics::StepMetrics& m, const char* name, double fallback = 0) {
  return m.Get(name).value_or(fallback);
}

void PrintEval(const char* when, const std::vector<metrics::NamedValue>& values) {
  std::printf("held-out %s:", when);
  for (const metrics::NamedValue& v : values) std::printf("  %s %.4g", v.name.c_str(), v.value);
  std::printf("\n");
  std::fflush(stdout);
}

void PrintStep(const metrics::StepMetrics& m, int64_t steps, double elapsed_s) {
  const int64_t done = m.step + 1;
  std::printf(
      "step %4lld/%lld  reward %.3f (std %.3f)  acc %.3f  kl %.4f  clipped %.3f  entropy %.3f  len %.1f (max "
      "%.0f, %.0f%% at max)  gen %.0f tok/s  gen/train %.0f/%.0f ms  kv %.2f MiB  ETA %.0fs\n",
      static_cast<long long>(done), static_cast<long long>(steps), ValueOr(m, names::kGrpoReward),
      ValueOr(m, names::kGrpoRewardStd), ValueOr(m, names::kAccuracy), ValueOr(m, names::kGrpoKl),
      ValueOr(m, names::kGrpoClippedFraction), ValueOr(m, names::kGrpoEntropy),
      ValueOr(m, names::kGrpoCompletionLength), ValueOr(m, names::kGrpoCompletionLengthMax),
      100 * ValueOr(m, names::kGrpoHitMaxNewTokens), ValueOr(m, names::kGrpoGenerationTokensPerS),
      ValueOr(m, names::kGenerationMs), ValueOr(m, names::kTrainingMs),
      ValueOr(m, names::kGrpoKvCacheBytes) / 1048576.0, elapsed_s / done * (steps - done));
  // On a device: each pass's peak, what `zerofit plan` predicts as its GRPO passes.
  if (m.Get(names::kGrpoGenerationPeakBytes) && m.Get(names::kGrpoTrainingPeakBytes)) {
    std::printf("  device peak: generation %.1f MiB, training %.1f MiB\n",
                ValueOr(m, names::kGrpoGenerationPeakBytes) / 1048576.0,
                ValueOr(m, names::kGrpoTrainingPeakBytes) / 1048576.0);
  }
  std::fflush(stdout);
}

// The reward sources: the answer rule (--reward, always), then --reward-format and --reward-model with
// their weights.
absl::Status ParseRewardFlags(const FlagTake& take, const FlagNumber& number,
                              std::vector<jobspec::RewardSpec>* rewards) {
  jobspec::RewardSpec answer;
  if (std::string v = take("--reward"); !v.empty()) answer.rule = v;
  answer.pattern = take("--reward-pattern");
  answer.group = take("--reward-group");
  *rewards = {answer};
  // type, the flag naming it (its value goes to `pattern` or `path`), the weight's flag.
  for (const auto& [type, flag, weight_flag] :
       {std::tuple{"format", "--reward-format", "--reward-format-weight"},
        {"model", "--reward-model", "--reward-model-weight"}}) {
    const std::string value = take(flag);
    if (value.empty()) continue;
    jobspec::RewardSpec source;
    source.type = type;
    (source.type == "model" ? source.path : source.pattern) = value;
    ZF_RETURN_IF_ERROR(number(weight_flag, &source.weight, -1e300));
    rewards->push_back(source);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseGrpoFlags(const FlagTake& take, const FlagNumber& number, int64_t max_length,
                            jobspec::GrpoJobSpec* g) {
  double samples = static_cast<double>(g->rollout.samples_per_prompt),
         new_tokens = 16,  // the CLI's default suits the example task; a spec's is 256
      batch = static_cast<double>(g->rollout.batch), iterations = g->grpo.iterations, eps_high = -1;
  ZF_RETURN_IF_ERROR(number("--samples-per-prompt", &samples, 2));
  ZF_RETURN_IF_ERROR(number("--max-new-tokens", &new_tokens, 1));
  ZF_RETURN_IF_ERROR(number("--temperature", &g->rollout.temperature, 1e-6));
  ZF_RETURN_IF_ERROR(number("--top-p", &g->rollout.top_p, 1e-6));
  double top_k = 0;
  ZF_RETURN_IF_ERROR(number("--top-k", &top_k, 0));
  g->rollout.top_k = static_cast<int64_t>(top_k);
  ZF_RETURN_IF_ERROR(number("--min-p", &g->rollout.min_p, 0));
  ZF_RETURN_IF_ERROR(number("--rollout-batch", &batch, 0));
  ZF_RETURN_IF_ERROR(number("--iterations", &iterations, 1));
  ZF_RETURN_IF_ERROR(number("--kl-beta", &g->grpo.beta, 0));
  ZF_RETURN_IF_ERROR(number("--epsilon", &g->grpo.epsilon, 1e-6));
  ZF_RETURN_IF_ERROR(number("--epsilon-high", &eps_high, 1e-6));
  g->rollout.samples_per_prompt = static_cast<int64_t>(samples);
  g->rollout.max_new_tokens = static_cast<int64_t>(new_tokens);
  g->rollout.batch = static_cast<int64_t>(batch);
  g->grpo.iterations = static_cast<int>(iterations);
  if (eps_high > 0) g->grpo.epsilon_high = eps_high;
  if (std::string v = take("--loss-type"); !v.empty()) g->grpo.loss_type = v;
  if (std::string v = take("--decode"); !v.empty()) g->rollout.decode = v;
  auto boolean = [&](const char* flag, bool* out) -> absl::Status {
    const std::string v = take(flag);
    if (v.empty()) return absl::OkStatus();
    if (v != "true" && v != "false")
      return absl::InvalidArgumentError(absl::StrCat("flag ", flag, ": '", v, "' is not true or false"));
    *out = v == "true";
    return absl::OkStatus();
  };
  if (std::string v = take("--scale-rewards"); !v.empty()) g->grpo.scale_rewards = v;
  ZF_RETURN_IF_ERROR(boolean("--mask-truncated-completions", &g->grpo.mask_truncated_completions));
  ZF_RETURN_IF_ERROR(boolean("--use-bias-correction-kl", &g->grpo.use_bias_correction_kl));
  ZF_RETURN_IF_ERROR(boolean("--normalize-advantages", &g->grpo.normalize_advantages));
  if (std::string v = take("--reward-clip-range"); !v.empty()) {
    const std::vector<std::string> parts = absl::StrSplit(v, ',');
    double lo = 0, hi = 0;
    if (parts.size() != 2 || !absl::SimpleAtod(parts[0], &lo) || !absl::SimpleAtod(parts[1], &hi)) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --reward-clip-range: '", v, "' is not MIN,MAX (two numbers)"));
    }
    g->grpo.reward_clip_range = std::pair<double, double>(lo, hi);
  }
  if (std::string v = take("--importance-sampling-level"); !v.empty()) g->grpo.importance_sampling_level = v;
  ZF_RETURN_IF_ERROR(number("--top-entropy-quantile", &g->grpo.top_entropy_quantile, 0));
  ZF_RETURN_IF_ERROR(number("--sapo-temperature-pos", &g->grpo.sapo_temperature_pos, 0));
  ZF_RETURN_IF_ERROR(number("--sapo-temperature-neg", &g->grpo.sapo_temperature_neg, 0));
  double delta = 0;
  ZF_RETURN_IF_ERROR(number("--delta", &delta, 0));
  if (delta > 0) g->grpo.delta = delta;
  ZF_RETURN_IF_ERROR(ParseRewardFlags(take, number, &g->rewards));
  return jobspec::ValidateGrpoJobSpec(g, max_length);
}

absl::Status RunGrpo(const PreferenceTrainOptions& o, const RuntimeOptions& runtime, int64_t log_every,
                     comm::Communicator* comm, metrics::MetricsRecorder* recorder) {
  const int rank = comm->rank();
  const absl::Time start = absl::Now();
  GrpoHooks hooks;
  hooks.on_start = [rank](const GrpoSession& session, const std::vector<metrics::NamedValue>& before) {
    if (rank != 0) return absl::OkStatus();
    std::printf("%s", session.DataReportText().c_str());
    PrintEval("before training", before);
    return absl::OkStatus();
  };
  hooks.on_step = [&](const metrics::StepMetrics& m) -> absl::Status {
    ZF_ASSIGN_OR_RETURN(const std::vector<std::string> warnings, recorder->Record(m));
    if (rank != 0) return absl::OkStatus();
    for (const std::string& w : warnings) std::fprintf(stderr, "%s\n", w.c_str());
    const int64_t done = m.step + 1;
    if (done % log_every == 0 || done == o.steps)
      PrintStep(m, o.steps, absl::ToDoubleSeconds(absl::Now() - start));
    return absl::OkStatus();
  };
  ZF_ASSIGN_OR_RETURN(const GrpoReport report, TrainGrpo(o, runtime, comm, hooks));
  if (rank == 0) {
    PrintEval("after training", report.after);
    std::printf("%.1f s\n", absl::ToDoubleSeconds(absl::Now() - start));
    if (!o.export_dir.empty()) std::printf("exported Hugging Face model to %s\n", o.export_dir.c_str());
  }
  return absl::OkStatus();
}

}  // namespace zerofit::worker
