// zerofit_train_prefs --task grpo (issue 32): the GRPO flags (into the job spec's rollout, grpo and rewards
// sections, so the run resolves through jobspec::Resolve like a `task: grpo` spec) and the run's output.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "comm/communicator.h"
#include "jobspec/grpo_spec.h"
#include "worker/metrics/metrics_recorder.h"
#include "worker/torch/train/preference_session.h"
#include "worker/torch/train/runtime_options.h"

namespace zerofit::worker {

inline constexpr const char* kGrpoUsage =
    "GRPO (--task grpo; --train/--test are prompt files, --data DIR reads DIR/train_prompts_ids.jsonl): "
    "[--samples-per-prompt G] [--max-new-tokens N] [--temperature T] [--top-p P] [--top-k K] [--min-p P] "
    "[--rollout-batch S] "
    "[--decode auto|eager|static|cuda_graph] "
    "[--iterations I] [--kl-beta B] [--epsilon E] [--epsilon-high E] [--loss-type "
    "grpo|dapo|dr_grpo|cispo|sapo|rloo] [--normalize-advantages true|false (rloo)] "
    "[--reward-clip-range MIN,MAX (rloo)] "
    "[--sapo-temperature-pos T] [--sapo-temperature-neg T] "
    "[--scale-rewards group|batch|none] [--importance-sampling-level token|sequence] [--delta D] "
    "[--mask-truncated-completions true|false] [--top-entropy-quantile RHO] [--use-bias-correction-kl "
    "true|false] [--reward "
    "exact|last_number|regex [--reward-pattern RE] "
    "[--reward-group "
    "G]] "
    "[--reward-format PATTERN] [--reward-format-weight W] [--reward-model DIR] [--reward-model-weight W] "
    "[--cuda-allocation-report FILE (a diagnostic: the live "
    "CUDA blocks at each pass boundary, with their allocating stacks)]";

using FlagTake = std::function<std::string(const char*)>;
using FlagNumber = std::function<absl::Status(const char*, double*, double)>;

// Reads the GRPO flags into `g` and validates it against `max_length` (errors name the flag's field).
absl::Status ParseGrpoFlags(const FlagTake& take, const FlagNumber& number, int64_t max_length,
                            jobspec::GrpoJobSpec* g);

// Trains with TrainGrpo: every rank records its metrics; rank 0 prints the rollout plan, held-out accuracy
// before and after, and a step line every `log_every` steps.
absl::Status RunGrpo(const PreferenceTrainOptions& o, const RuntimeOptions& runtime, int64_t log_every,
                     comm::Communicator* comm, metrics::MetricsRecorder* recorder);

}  // namespace zerofit::worker
