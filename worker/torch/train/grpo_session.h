// GRPO policy training (issue 32) as a TrainingSession (worker/loop/training_session.h): what zerofit_worker
// and zerofit_train_prefs run for `task: grpo`. One step, on every rank:
//   1. rollout: this rank's prompts (the coordinator's micro-batches of prompt indices, each handed out once)
//      each sampled G times with the very parameters ZeRO-2 holds (no second copy of the weights), in
//      passes of rollout_batch sequences over a KV cache sized for one pass (kv_cache.h);
//   2. rewards from every source, summed with weights (rollout_scorer.h); group-relative advantages;
//   3. `iterations` optimizer steps over the rollout, its sequences split into as many micro-batches as the
//      step has (they count sequences, as the planner's micro-batch does), with GRPO's clipped loss
//      (grpo_objective.h) against the log-probs the rollout was sampled with (kept from the first pass when
//      iterations > 1) and, with beta > 0, a frozen resident copy of the initial policy as the reference.
// Sampling state: prompt p's sample g in step s is drawn with seed Mix(seed, s) and sequence index p x G + g
// (generation.h), so the rollouts are a function of (weights, step, prompt) only: a job resumed from a
// checkpoint, or run on another world size, samples what an uninterrupted one would.
// Steps and checkpoints count rollout batches; the optimizer applies `iterations` updates per step, and the
// learning-rate schedule runs over steps x iterations updates. A step's metrics are metric_names' kGrpo*,
// accuracy (the first answer source's) and the optimizer's (worker/metrics/step_metrics.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "worker/loop/training_session.h"
#include "worker/torch/train/preference_session.h"
#include "worker/torch/train/runtime_options.h"

namespace zerofit::worker {

// The session's preconditions on the GRPO options, for every caller: a plan's were checked when its spec was
// read (jobspec::ValidateGrpoJobSpec), options built in code (tests, benchmarks) are checked here. Errors
// name the job spec's field (rollout.samples_per_prompt, ...).
absl::Status ValidateGrpoOptions(const PreferenceTrainOptions& o);

// Bytes of one generation pass's KV cache for `prompt_length` tokens of prompt (kv_cache.h's formula) with
// the rollout's sequences in flight when a rank has `prompts_per_rank` prompts in a step. `config` as the
// model resolved it (LlamaModelImpl::config()).
int64_t PlannedKvCacheBytes(const PreferenceTrainOptions& o, int64_t prompts_per_rank, int64_t prompt_length,
                            const core::HfModelConfig& config);

struct GrpoRows;  // a micro-batch's training tensors (grpo_rows.h)

class GrpoSession final : public TrainingSession {
 public:
  // Collective over `comm`: loads config, tokenizer (when data.tokenizer_dir is set) and prompts, builds the
  // policy (and the reference when beta > 0) and binds it to ZeRO-2.
  static absl::StatusOr<std::unique_ptr<GrpoSession>> Create(const PreferenceTrainOptions& options,
                                                             const RuntimeOptions& runtime,
                                                             comm::Communicator* comm);
  ~GrpoSession() override;

  // Per prompt: G x (prompt + max_new_tokens) tokens, what a step's work grows with.
  std::vector<int64_t> TrainLengths() const override;
  std::string DataReportText() const override;
  absl::StatusOr<metrics::StepMetrics> Step(int64_t step, const MicroBatches& micro_batches) override;
  // Greedy completions of the held-out prompts (sharded across ranks): eval/accuracy (the answer rule),
  // eval/grpo/reward, eval/grpo/completion_length, eval/prompts.
  absl::StatusOr<std::vector<metrics::NamedValue>> Evaluate() override;
  absl::Status SaveCheckpoint(const std::string& dir, const std::string& extra, int keep) override;
  absl::StatusOr<int64_t> LoadCheckpoint(const std::string& dir) override;
  absl::Status Export(const std::string& dir) override;

  const PreferenceTrainOptions& options() const { return options_; }
  int64_t longest_prompt() const;
  // PlannedKvCacheBytes of the longest prompt with `prompts_per_rank` prompts per rank and step.
  int64_t planned_kv_cache_bytes(int64_t prompts_per_rank) const;

 private:
  struct State;
  struct Rollout;

 private:
  GrpoSession(std::unique_ptr<State> state, const PreferenceTrainOptions& options,
              const RuntimeOptions& runtime);
  absl::StatusOr<Rollout> RunRollout(int64_t step, const MicroBatches& micro);
  // The rollout's advantages (GroupAdvantages); scale_rewards batch takes the standard deviation of every
  // rank's rewards of the step: collective, so every rank calls it, one without prompts too.
  absl::Status SetAdvantages(Rollout& rollout);
  // RLOO (loss_type rloo): leave-one-out advantages of `rewards` (the rank's, group by group), normalised
  // over every rank's with normalize_advantages (collective then).
  absl::Status SetRlooAdvantages(Rollout& rollout, const std::vector<double>& rewards);
  // RLOO's rewards: each completion's scored total, clamped to reward_clip_range when one is given.
  std::vector<double> RlooRewards(const Rollout& rollout) const;
  // RLOO with beta > 0: the rewards less beta x each completion's summed (old - reference) log-probs, their
  // advantages (SetRlooAdvantages), written into the rows.
  absl::Status PenalizeRewardsWithKl(Rollout& rollout, std::vector<GrpoRows>& rows);
  bool KlInReward() const { return options_.grpo.objective.rloo && options_.grpo.objective.beta > 0; }
  absl::Status Optimize(int64_t step, const MicroBatches& micro, Rollout& rollout);
  // Collective with top_entropy_quantile below 1 (the step's entropy threshold over every rank).
  absl::StatusOr<std::vector<GrpoRows>> TrainingRows(const Rollout& rollout, size_t gradient_accumulation);
  // The data report's reference line: none, lora-base, or a resident copy with its bytes.
  std::string ReferenceText() const;
  // report_step >= 0: the allocation report's point before this micro-batch's backward (its first).
  absl::Status MicroStep(const GrpoRows& rows, bool last, torch::Tensor* sums, int64_t report_step);
  absl::StatusOr<metrics::StepMetrics> StepMetricsOf(int64_t step, const Rollout& rollout);
  std::vector<double> LocalSums(const Rollout& rollout) const;
  void SetRolloutValues(const std::vector<double>& sum, double max_length, double max_generation_ms,
                        metrics::StepMetrics* m) const;

  std::unique_ptr<State> state_;
  PreferenceTrainOptions options_;
  RuntimeOptions runtime_;
};

struct GrpoHooks {
  std::function<absl::Status(const GrpoSession&, const std::vector<metrics::NamedValue>& before)> on_start;
  std::function<absl::Status(const metrics::StepMetrics&)> on_step;  // eval/ values after an evaluation
};

// Runs options.steps steps locally with the coordinator's scheduler (jobspec/step_scheduler.h) over the
// prompts: the same prompt batches `zerofit run` hands out. Returns the held-out metrics before and after.
struct GrpoReport {
  std::vector<metrics::NamedValue> before, after;
};
absl::StatusOr<GrpoReport> TrainGrpo(const PreferenceTrainOptions& options, const RuntimeOptions& runtime,
                                     comm::Communicator* comm, const GrpoHooks& hooks = {});

}  // namespace zerofit::worker
