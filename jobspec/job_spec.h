// A job as users write it: YAML (job.yaml), whose `training` section may instead point at a DeepSpeed JSON
// config. Parsing checks every field; an error names the file, the line and the field
// ("job.yaml:7: field 'training.lr': expected a number, got 'fast'").
//
//   name: mistral-rm
//   task: reward                 # reward | dpo | sft
//   model: /models/mistral-7b    # a directory with config.json (or a planner preset for planning only)
//   init: /models/mistral-sft    # optional: the weights to start from (default: model's model.safetensors)
//   data: /data/prefs            # train_ids.jsonl / test_ids.jsonl; or text/chat JSONL files:
//   #  data: {train: prefs/train.jsonl, test: prefs/test.jsonl, tokenizer: /models/qwen, add_bos: auto}
//   eval: {every: 50, max_samples: 512}   # held-out evaluation during training
//   world_size: 2                # ranks (one per GPU)
//   hardware: 8x64GB             # for the planner when sizes are left out
//   max_restarts: 3
//   training:                    # or: deepspeed: ds_config.json
//     steps: 1000
//     global_batch: 64           # pairs (reward, dpo) or sequences (sft) per optimizer step
//     micro_batch: 2             # per rank; leave out (with gradient_accumulation) to let the planner size
//     gradient_accumulation: 4
//     lr: 1.0e-5
//     lr_schedule: cosine        # constant | linear | cosine, after a linear warmup
//     warmup_steps: 30
//     min_lr: 1.0e-6
//     weight_decay: 0.0
//     zero_stage: 2
//     offload: false
//     delayed_update_from: 10    # with offload: ZeRO-Offload's delayed parameter update from step 10 on
//     checkpointing: false
//     bf16: true
//     max_length: 1024
//     seed: 1234                 # initial weights of new layers, and the order of the samples
//   dpo: {beta: 0.1, loss_type: sigmoid, label_smoothing: 0.0}   # task dpo (objective_spec.h)
//   reward: {center_rewards_coefficient: 0.01}                   # task reward (objective_spec.h)
//   sft: {completion_only_loss: true}                            # task sft (objective_spec.h)
//   checkpoint: {dir: /ckpt/mistral-rm, every: 100, keep: 1}
//   watchdog: {step_time_factor: 10, floor_s: 300}   # hang detection; `watchdog: off` turns it off
//   lora: {rank: 16, alpha: 32, dropout: 0.05, target_modules: [q_proj, v_proj]}   # optional (lora_spec.h)
//   export: /models/mistral-rm   # the trained model in Hugging Face format, after the last step (not
//                                # the model's, init's or a reward model's directory: it would replace them)
//   log_every: 10                # in a pipe or file, a progress line every 10 steps (default: about 1%)
//   slurm:                       # for `zerofit slurm` / `zerofit submit --slurm` (docs/slurm.md)
//     nodes: 2
//     gpus_per_node: 8           # one task (rank) per GPU
//     cpus_per_task: 10
//     mem: 480G                  # per node
//     time: "04:00:00"
//     partition: gpu
//     account: rlhf
//     signal_seconds: 300        # SIGUSR1 this long before the time limit: checkpoint, requeue
//     state_dir: /shared/zerofit/mistral-rm   # job store, token, script, logs (a shared filesystem)
//     on_node_loss: shrink       # wait (default): a requeued job waits for all its nodes; shrink: it may
//     min_nodes: 1               #   resume on fewer (>= min_nodes), re-planned to the same global batch
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/lr_schedule.h"
#include "jobspec/grpo_spec.h"
#include "jobspec/lora_spec.h"
#include "jobspec/objective_spec.h"
#include "jobspec/optimizer_spec.h"

namespace zerofit::jobspec {

struct TrainingSpec {
  int64_t steps = 100;
  int64_t global_batch = 64;
  std::optional<int64_t> micro_batch;
  std::optional<int64_t> gradient_accumulation;
  double lr = 1e-5;  // the peak rate
  // The rate over the steps (core/lr_schedule.h): linear warmup over warmup_steps, then constant, linear or
  // cosine decay to min_lr at decay_steps (0: at `steps`).
  core::LrDecay lr_schedule = core::LrDecay::kConstant;
  int64_t warmup_steps = 0;
  double min_lr = 0.0;
  int64_t decay_steps = 0;
  double weight_decay = 0.0;
  double max_grad_norm = 1.0;
  int zero_stage = 2;
  bool offload = false;
  // With offload: ZeRO-Offload's delayed parameter update (DPU) from this optimizer step on: the host's
  // AdamW of step t runs during step t+1's forward and backward, which see the parameters from before
  // update t (docs/offload.md); unset: off.
  std::optional<int64_t> delayed_update_from;
  // training.optim and training.min_8bit_size (optimizer_spec.h): fp32 or 8-bit AdamW moments.
  OptimizerSpec optimizer;
  std::optional<bool> checkpointing;
  bool bf16 = false;
  int64_t max_length = 512;
  // The initial weights of a model without a checkpoint to start from (a score head, LoRA adapters) and the
  // order of the training samples, as Hugging Face's `seed`; every rank and every attempt uses the same.
  int64_t seed = 1234;
};

struct CheckpointSpec {
  std::string dir;  // empty: no checkpoints
  int64_t every = 100;
  int keep = 1;
  // A job starting from step 0 may replace the checkpoints an earlier zerofit job left in `dir` (only
  // folders carrying zerofit's owner marker; a directory zerofit did not create is still refused), like
  // Hugging Face's overwrite_output_dir. Off: such a directory is refused at submit.
  bool overwrite = false;
  // A job starting from step 0 continues from the checkpoint `dir`'s `latest` names, whichever zerofit job
  // wrote it (TRL's resume_from_checkpoint, `zerofit run --resume`): its parameters, optimizer state, loss
  // scale and step; it trains the steps after it and takes over that job's checkpoint folders (they rotate as
  // its own). Nothing there: it starts from step 0. Excludes `overwrite`.
  bool resume = false;
};

// Where the preference pairs come from: a directory of token-id files (`data: DIR`, DIR/train_ids.jsonl and
// DIR/test_ids.jsonl, as examples/make_arith_prefs and zerofit tokenize write them), or JSONL files of text,
// chat messages or token ids (docs/data.md) read with a Hugging Face tokenizer in the training processes:
//   data:
//     train: prefs/train.jsonl   # required
//     test: prefs/test.jsonl     # held-out pairs; optional
//     tokenizer: /models/qwen    # tokenizer.json (+ tokenizer_config.json); default: `model` when it has one
//     max_prompt_length: 256     # the prompt part's limit when a pair is truncated; default max_length / 2
//     add_bos: auto              # auto | true | false
//     eos_token: <|im_end|>      # TRL's eos_token: a token of the vocabulary that becomes the EOS
//     chat_template: chatml.jinja  # TRL's chat_template_path: a .jinja/.j2 file or a model directory
// Paths are as the workers see them. eos_token and chat_template change the tokenizer the workers read text
// with (data::TokenizerOverrides), and the export carries it so changed.
struct DataSpec {
  std::string dir;  // the directory form; empty with the file form
  std::string train, test, tokenizer;
  int64_t max_prompt_length = 0;  // 0: max_length / 2
  std::string add_bos = "auto";
  std::string eos_token;      // empty: the tokenizer's
  std::string chat_template;  // empty: the tokenizer's
};

// Held-out evaluation during training: after every `every`-th step (0: only after the last), on the first
// max_samples pairs (0: all) of `data` (default: data.test, or the directory form's test_ids.jsonl).
struct EvalSpec {
  int64_t every = 0;
  std::string data;
  int64_t max_samples = 0;
};

// The coordinator's progress watchdog (coordinator/job_state.h): a rank whose heartbeats still arrive but
// that makes no progress (asks for no new step, reports no step) for
//   max(step_time_factor x median of the recent step times, floor_s)
// is declared hung; the attempt is aborted and the job restarts from its last checkpoint (one of
// max_restarts). The floor must cover what no step time predicts: loading the checkpoint a restart resumes
// from and the first step's warm-up, an evaluation, a checkpoint write; hence the generous default. The
// export after the last step is not watched (the ranks wait for it at a barrier with its own deadline).
struct WatchdogSpec {
  bool enabled = true;           // `watchdog: off` (or false): only missed heartbeats fail an attempt
  double step_time_factor = 10;  // K, >= 1
  double floor_s = 300;          // seconds, >= 1
};

// Where rank 0 writes every step's named metrics besides the coordinator (worker/metrics/). Paths are as the
// workers see them; empty: not written.
struct MetricsSpec {
  std::string tensorboard;  // a directory: events.out.tfevents.<seconds>.<host> files
  std::string jsonl;        // a file: one JSON object per step, appended
};

// What a job does when Slurm requeues it after losing a node: wait until it has `nodes` nodes again (the
// default), or resume on the nodes it gets, from `min_nodes` up (sbatch --nodes=MIN-MAX), with the same
// global batch and more gradient accumulation per rank (coordinator/attempt_plan.h).
enum class NodeLoss { kWait, kShrink };
const char* NodeLossName(NodeLoss n);

// How a job runs under Slurm. Every field can also be given as a flag of `zerofit slurm` / `zerofit submit
// --slurm` (flags win). Nothing here has a cluster-specific default: an empty field is left to Slurm's
// own defaults (the partition's time limit, the default account...).
struct SlurmSpec {
  int nodes = 1;
  int gpus_per_node = 0;   // 0: no GPUs requested (CPU jobs)
  int tasks_per_node = 0;  // 0: gpus_per_node (one rank per GPU); required when gpus_per_node is 0
  int cpus_per_task = 0;   // 0: Slurm's default
  std::string mem;         // per node, Slurm syntax (480G, 0 = all of it); empty: Slurm's default
  std::string time;        // time limit, Slurm syntax (04:00:00, 2-00:00:00); empty: the partition's
  std::string partition;
  std::string account;
  std::string qos;
  int signal_seconds = 120;        // --signal=B:USR1@N: preemption warning before the time limit
  bool requeue = true;             // a preempted job (SIGUSR1 or exit 75) requeues itself
  std::string state_dir;           // default: ./zerofit-<name> (must be visible from every node)
  std::string coordinator;         // host:port of an external `zerofit serve`; empty: one on the first node
  int port = 0;                    // the first node's coordinator port (0: any free port)
  std::vector<std::string> extra;  // more sbatch options, verbatim ("--exclusive", "--constraint=h100")
  NodeLoss on_node_loss = NodeLoss::kWait;
  int min_nodes = 0;  // the fewest nodes an attempt may run on with kShrink; 0: nodes

  int ranks_per_node() const { return tasks_per_node > 0 ? tasks_per_node : gpus_per_node; }
  // The fewest nodes an attempt may run on: min_nodes with kShrink, else all of them.
  int fewest_nodes() const { return on_node_loss == NodeLoss::kShrink && min_nodes > 0 ? min_nodes : nodes; }
};

struct JobSpec {
  std::string name;
  std::string task;  // reward | dpo | sft | grpo
  std::string model;
  // Task grpo: data.train and data.test (or the eval data) are prompt files (worker/data/prompt_dataset.h);
  // a data directory holds train_prompts_ids.jsonl and test_prompts_ids.jsonl. training.global_batch counts
  // prompts.
  DataSpec data;
  GrpoJobSpec grpo;  // task grpo: rollout, objective, rewards
  EvalSpec eval;
  int world_size = 1;
  std::string hardware = "8x64GB";
  int max_restarts = 3;
  std::string device = "auto";  // auto | cpu | cuda: where each rank trains (cuda:<local rank>)
  TrainingSpec training;
  DpoSpec dpo;            // task dpo: the loss (objective_spec.h)
  RewardLossSpec reward;  // task reward: the loss's centring term (objective_spec.h)
  SftSpec sft;            // task sft: which tokens the loss scores (objective_spec.h)
  LoraSpec lora;          // rank 0: no `lora` section, a full fine-tune
  // The weights to start from: a safetensors file or a model directory (an SFT job's export); empty: the
  // model directory's own model.safetensors when it has one, else a random initialisation from `seed`.
  std::string init;
  CheckpointSpec checkpoint;
  MetricsSpec metrics;
  WatchdogSpec watchdog;
  // Rank 0 writes the trained model here after the last step in Hugging Face format (model.safetensors +
  // config.json; LoRA merged); empty: no export. A path as the workers see it.
  std::string export_dir;
  bool world_size_given = false;  // world_size was written in the spec (not the default)
  std::optional<SlurmSpec> slurm;
  // How often a progress line is printed where it cannot be redrawn in place (`zerofit run` and `zerofit logs
  // -f` into a pipe or a file, a Slurm job's output): every log_every-th step, the first and the last step,
  // and at least one every 30 s (cli/progress_reporter.h). Always >= 1 after parsing: the spec's, or
  // DefaultLogEvery(training.steps). A terminal shows every step in place whatever this says.
  int64_t log_every = 1;
};

// About 1% of a job's steps, at least 1: a 400-step job prints every 4th step, a 10,000-step one every 100th.
int64_t DefaultLogEvery(int64_t steps);

// Checks a Slurm section (after flags were applied): sizes positive, world_size == nodes x ranks per node
// when the spec gave a world size. `source` names the spec in errors.
absl::Status ValidateSlurm(const JobSpec& spec, const SlurmSpec& slurm, const std::string& source);

// The world sizes an attempt of `spec` may run at, ascending: nodes' x ranks per node for every node count
// from slurm.fewest_nodes() to slurm.nodes (slurm.on_node_loss: shrink), else just spec.world_size.
std::vector<int> AllowedWorldSizes(const JobSpec& spec);

// The spec text with the given `slurm:` fields set (flags of `zerofit slurm` that the coordinator must see
// in the spec snapshot): a value replaces the field's plain scalar, a missing field is added as the first
// line of a block-style `slurm:` section, and a spec without `slurm:` gets one appended. The result is
// parsed again and must carry exactly these values; a spec it cannot edit (a flow-style section) is an
// error naming the field and asking to write it into the spec. `values`: field name -> YAML scalar.
absl::StatusOr<std::string> SetSlurmFields(const std::string& yaml_text, const std::string& source,
                                           const std::vector<std::pair<std::string, std::string>>& values);

// The learning-rate schedule of a training section (peak = lr, decay ends at decay_steps or steps).
core::LrScheduleOptions LrScheduleOf(const TrainingSpec& training);

// `source` names the text in errors (the file name). `base_dir` resolves a relative `deepspeed:` path. With
// `deepspeed:`, a `training:` section may still give what a DeepSpeed config has no field for: steps and
// max_length.
// Why `name` cannot name a job ("" when it can): 1..128 bytes without control characters. A job's name goes
// into `zerofit list`, log lines and the sbatch script's comment, where a newline or an escape sequence
// would act; the spec's `name`, and the name `zerofit submit --name` gives, are checked with it.
std::string JobNameProblem(const std::string& name);

absl::StatusOr<JobSpec> ParseJobSpec(const std::string& yaml_text, const std::string& source,
                                     const std::string& base_dir = ".");

// The line (1-based) of a field of a parsed spec's text ("model", "data.train", "rewards[1].path"; or the
// closest enclosing field present), for errors found after parsing, such as an input file the workers could
// not open; 0 when the text names none of it.
int FieldLine(const std::string& yaml_text, const std::string& field);

// A job spec is at most this long (with its DeepSpeed config inlined by `zerofit submit`: gRPC's default
// message limit is 4 MiB).
inline constexpr uint64_t kMaxJobSpecBytes = 1 << 20;

// The text of the job spec file a command line names, which may be a pipe; past kMaxJobSpecBytes refused,
// naming the limit; "cannot read 'PATH'" when it cannot be opened.
absl::StatusOr<std::string> ReadJobSpecFile(const std::string& path);

// `zerofit run --resume`: sets checkpoint.resume on a parsed spec, with the field's own rules (it needs
// checkpoint.dir and excludes checkpoint.overwrite); errors name the field and its line in `yaml_text`.
absl::Status ResumeFromCheckpointDir(JobSpec* spec, const std::string& yaml_text, const std::string& source);

// What `zerofit submit` sends instead of a `deepspeed: PATH` spec: the same text with PATH replaced by the
// file's JSON on one line, single-quoted (a `deepspeed:` value starting with '{' is such a config; line
// numbers are unchanged). The coordinator then never opens a file a client named, nor resolves a path
// against its own working directory. PATH is resolved against `base_dir` and read only when it is a regular
// file of at most 1 MiB holding a JSON object; errors name the field, `source` and line. A spec without
// `deepspeed:`, with it inline already, or not parseable (the coordinator reports that) is returned as is.
absl::StatusOr<std::string> InlineDeepSpeedConfig(const std::string& yaml_text, const std::string& source,
                                                  const std::string& base_dir = ".");

// The `training` section from a DeepSpeed JSON config: zero_optimization.stage,
// zero_optimization.offload_optimizer.device, train_micro_batch_size_per_gpu, gradient_accumulation_steps,
// train_batch_size, bf16.enabled, gradient_clipping, optimizer.params.{lr, weight_decay}, and scheduler
// (WarmupLR, WarmupDecayLR, WarmupCosineLR with a linear warmup from 0). `world_size` turns train_batch_size
// into a global batch check. A value "auto" (Hugging Face's: from the training arguments) reads as left out:
// the spec's `training:` section may give it, else zerofit chooses (the planner sizes micro-batch and
// accumulation; total_num_steps "auto" decays to the last step).
struct DeepSpeedTraining {
  TrainingSpec training;
  std::map<std::string, std::string> given;  // the fields the config set: YAML name -> DeepSpeed name
  std::optional<double> cos_min_ratio;       // WarmupCosineLR: min_lr = ratio x lr, once lr is known
  std::string warmup_type;                   // with a scheduler: its warmup_type (DeepSpeed's default "log")
  std::string source;                        // names the config in errors
};
absl::StatusOr<DeepSpeedTraining> ReadDeepSpeedConfig(const std::string& json_text, const std::string& source,
                                                      int world_size);
// Completes `t` (the config's section with the spec's `training:` entries merged in) with what depends on
// both: the cosine floor, and the checks of the warmup against the scheduler.
absl::Status FinishDeepSpeedTraining(const DeepSpeedTraining& config, TrainingSpec* t);
// ReadDeepSpeedConfig, finished and validated on its own (errors name DeepSpeed's fields).
absl::StatusOr<TrainingSpec> ParseDeepSpeedConfig(const std::string& json_text, const std::string& source,
                                                  int world_size);

}  // namespace zerofit::jobspec
