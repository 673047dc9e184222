// PreferenceSession: reward-model, DPO and SFT training of a Llama-family model on preference pairs, through
// the ZeRO-2 engine (and optionally optimizer offload) on every rank of a communicator; what it trains
// (PreferenceTrainOptions, shared with GRPO's session) and TrainPreferences, the local loop over its steps.
// Readable top to bottom: load data and model, bind to ZeRO-2, loop over steps (sample -> shard pairs by rank
// and micro-batch -> forward -> loss -> backward with overlapping reduce-scatter -> step), evaluate on
// held-out pairs, export in Hugging Face format.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "core/lr_schedule.h"
#include "sharding/zero2_optimizer.h"
#include "worker/data/data_report.h"
#include "worker/data/training_data.h"
#include "worker/torch/model/llama_model.h"
#include "worker/torch/train/grpo_task_options.h"
#include "worker/torch/train/objectives.h"
#include "worker/torch/train/reference_model.h"
#include "worker/torch/train/runtime_options.h"
#include "worker/torch/train/training_backend.h"

namespace zerofit::worker {

// What a run trains: the job plan (jobspec/job_plan.h) typed for the trainer. OptionsFromPlan
// (plan_options.h) is the one place that fills it from a plan; the tests fill it directly. How this process
// runs it (GPU, gradient buckets, threads, kernels) is RuntimeOptions (runtime_options.h).
struct PreferenceTrainOptions {
  // kSft: supervised fine-tuning on SFT examples or pairs' chosen responses (the usual first stage; reward
  // models and DPO then start from its export with --init). It reports the loss per scored token and the
  // perplexity, no accuracy (its examples have nothing to be ranked against).
  // kGrpo: policy training with rollouts (grpo_session.h): `data.train` and `data.test` are prompt files
  // (worker/data/prompt_dataset.h), `grpo` says how to sample and reward, global_batch counts prompts.
  enum class Task { kReward, kDpo, kSft, kGrpo };
  Task task = Task::kReward;
  // The model's directory: config.json (shapes and special ids; a Hugging Face model directory).
  std::string model_dir;
  // Training and held-out pairs and the tokenizer that reads text in them (worker/data/training_data.h);
  // data::DataSourceOfDirectory(dir) for the token-id files of examples/make_arith_prefs.
  data::DataSource data;
  std::string init_weights;  // optional: safetensors file or model directory to start from
  int64_t steps = 100;
  int64_t global_batch = 32;      // pairs per optimizer step, over all ranks
  int gradient_accumulation = 1;  // per rank per step (gradient accumulation)
  int64_t max_length = 64;
  uint64_t seed = 1234;  // initial weights of new layers (score head, LoRA), the order of the samples
  // The learning rate: its peak, warmup and decay (a total_steps of 0 means `steps`). Each step's rate is
  // computed from it and given to the optimizer's Step.
  core::LrScheduleOptions schedule;
  float weight_decay = 0.0f;
  float max_grad_norm = 1.0f;
  // ZeRO-Offload: optimizer state in host memory, updated by CPU AdamW; from optimizer step
  // delayed_update_from on (-1: never) its delayed parameter update (sharding/offload_updater.h).
  bool offload = false;
  int64_t delayed_update_from = -1;
  // AdamW's moments: fp32, or 8-bit blockwise (the spec's training.optim: adamw_8bit).
  optim::MomentOptions moments;
  LlamaOptions model;  // LoRA, activation checkpointing, dtype (the attention kernel: RuntimeOptions)
  DpoOptions dpo;
  // kReward: the centring term's coefficient (BradleyTerryLoss; the spec's
  // reward.center_rewards_coefficient).
  double center_rewards_coefficient = 0;
  GrpoTaskOptions grpo;  // kGrpo only
  ReferenceStrategy reference = ReferenceStrategy::kResident;
  std::string export_dir;  // written by rank 0 after training if non-empty
  // Held-out evaluation during training (spec `eval:`, --eval-every): after every eval_every-th step and
  // after the last (0: after the last only), on the first eval_max_samples held-out pairs (0: all). It
  // does not change training: same parameters with or without it.
  int64_t eval_every = 0;
  int64_t eval_max_samples = 0;
  // Where to train: auto = cuda:<RuntimeOptions.local_rank> when LibTorch and this build have CUDA and a GPU
  // is visible.
  device::DeviceChoice device = device::DeviceChoice::kAuto;
};

struct EvalReport {
  PairMetrics metrics;  // summed over all held-out pairs
  double accuracy() const { return metrics.pairs > 0 ? metrics.correct / metrics.pairs : 0.0; }
};

struct StepReport {
  int64_t step = 0;           // 0-based (core/lr_schedule.h)
  float lr = 0.0f;            // the learning rate this step applied (the schedule's)
  PairMetrics metrics;        // summed over ranks for this step
  PairMetrics local_metrics;  // this rank's share (which rank a NaN loss came from)
  sharding::StepResult result;
  PeakMemory peak;                 // this rank's device peak over this step, host peak RSS so far
  std::optional<EvalReport> eval;  // the held-out evaluation after this step, when EvalDue
};

struct TrainReport {
  EvalReport before, after;  // held-out evaluation before and after training
  sharding::Zero2MemoryStats memory;
  size_t reference_device_bytes = 0;
};

absl::StatusOr<PreferenceTrainOptions::Task> ParseTask(const std::string& name);  // "reward" | "dpo" | "sft"

// Whether the held-out set is evaluated after `step` (0-based): every eval_every-th step and the last.
bool EvalDue(const PreferenceTrainOptions& options, int64_t step);

// The learning-rate schedule of `options`: its schedule with total_steps = steps where that is 0 (GRPO:
// steps x iterations, the optimizer updates).
core::LrScheduleOptions EffectiveSchedule(const PreferenceTrainOptions& options);

// One training run's state, stepped from outside (the coordinator's worker hands in the micro-batches of each
// step) or by TrainPreferences below (the same scheduler, run locally). Every method is collective over
// `comm` unless it says otherwise.
class PreferenceSession {
 public:
  // Loads the model's config.json and the data (tokenizing text with the model's tokenizer), builds the
  // policy (and the DPO reference), binds it to ZeRO-2.
  static absl::StatusOr<std::unique_ptr<PreferenceSession>> Create(const PreferenceTrainOptions& options,
                                                                   const RuntimeOptions& runtime,
                                                                   comm::Communicator* comm);
  ~PreferenceSession();

  const PreferenceTrainOptions& options() const { return options_; }
  size_t num_train_pairs() const;
  // The training file measured before truncation (data_report.h); the same on every rank.
  const data::DataReport& data_report() const;
  // Tokens of every training pair (prompt + chosen + rejected): what the coordinator balances.
  std::vector<int64_t> TrainLengths() const;
  // One optimizer step over this rank's micro-batches (indices into the training pairs; an empty micro-batch
  // takes part with zero gradients). Every rank passes the same number of micro-batches.
  absl::StatusOr<StepReport> Step(int64_t step, const std::vector<std::vector<uint64_t>>& micro_batches);
  absl::StatusOr<EvalReport> Evaluate();
  // World-size-independent checkpoint of the trainable state (sharding/checkpoint.h).
  absl::Status SaveCheckpoint(const std::string& root, const std::string& extra, int keep);
  // NotFound when `root` holds no checkpoint. Returns the optimizer steps the checkpoint had applied.
  absl::StatusOr<int64_t> LoadCheckpoint(const std::string& root);
  // Rank 0 writes; a no-op on other ranks (not collective).
  absl::Status Export(const std::string& dir);
  TrainReport Summary() const;  // memory and reference bytes (before/after evaluations left empty)
  const torch::Device& torch_device() const;

 private:
  struct State;
  PreferenceSession(std::unique_ptr<State> state, const PreferenceTrainOptions& options,
                    const RuntimeOptions& runtime);
  std::unique_ptr<State> state_;
  PreferenceTrainOptions options_;
  RuntimeOptions runtime_;
};

// What a caller sees of a run; each runs on every rank, and an error from one stops training (every rank
// must then return one, e.g. from the global loss being NaN).
struct TrainHooks {
  // After the data and model are loaded, before the held-out evaluation and the first step.
  std::function<absl::Status(const PreferenceSession&, const EvalReport& before)> on_start;
  std::function<absl::Status(const StepReport&)> on_step;  // with .eval set after an evaluation
};

// Collective: every rank of `comm` calls it with the same options.
absl::StatusOr<TrainReport> TrainPreferences(const PreferenceTrainOptions& options,
                                             const RuntimeOptions& runtime, comm::Communicator* comm,
                                             const TrainHooks& hooks = {});

}  // namespace zerofit::worker
