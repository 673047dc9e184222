// zerofit_train_prefs: reward-model or DPO training on preference pairs with ZeRO-2 on every MPI rank.
//   mpiexec -n 2 zerofit_train_prefs --task reward --data DIR [--steps N] [--offload] ...
// DIR holds config.json, train_ids.jsonl and test_ids.jsonl (see examples/make_arith_prefs); or --model DIR
// --train FILE [--test FILE] read text, chat or token-id JSONL with the model's tokenizer.json.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "comm/communicator_factory.h"
#include "comm/mpi/mpi_environment.h"
#include "core/status_macros.h"
#include "jobspec/job_plan.h"
#include "jobspec/resolve.h"
#include "launch/launch_env.h"
#include "planner/hardware.h"
#include "worker/data/job_files.h"
#include "worker/metrics/metrics_recorder.h"
#include "worker/mpi_main.h"
#include "worker/torch/programs/grpo_cli.h"
#include "worker/torch/train/memory_probe.h"  // PlannerReference
#include "worker/torch/train/named_step_metrics.h"
#include "worker/torch/train/plan_options.h"
#include "worker/torch/train/preference_session.h"

namespace zerofit::worker {
namespace {

constexpr const char* kUsage =
    "usage: mpiexec -n W zerofit_train_prefs --task reward|dpo|sft (--data DIR | --model DIR --train FILE "
    "[--test FILE] [--tokenizer DIR] [--eos-token TOKEN] [--chat-template FILE|DIR]) [--add-bos "
    "auto|true|false] [--max-prompt-length N] [--eval-every N] "
    "[--eval-max-samples N] [--steps N] [--global-batch B] "
    "[--micro K] [--lr LR] [--weight-decay WD] [--optim adamw_torch|adamw_8bit] [--min-8bit-size N] "
    "[--max-length T] [--seed S] [--offload] [--threads T] "
    "[--dpu-start N] "
    "[--lr-schedule constant|linear|cosine] [--warmup-steps N] [--min-lr LR] [--reduce-once] [--lora-rank R] "
    "[--lora-alpha A] [--checkpointing] [--beta B] [--loss "
    "sigmoid|ipo|hinge|robust|exo_pair|nca_pair|sppo_hard|apo_zero|apo_down|discopop|simpo|orpo] "
    "[--simpo-gamma G] [--discopop-tau T] [--ld-alpha A] "
    "[--rpo-alpha A] [--reference-free true|false] "
    "[--center-rewards-coefficient C] [--completion-only-loss true|false] [--assistant-only-loss true|false] "
    "[--label-smoothing LS] [--ref resident|offloaded|precomputed|lora-base] [--init WEIGHTS] [--export DIR] "
    "[--dtype fp32|bf16] [--attention auto|manual|sdpa] [--fused-kernels cuda|off] [--log-every N] "
    "[--memory-gb G] [--device "
    "auto|cpu|cuda] [--device-comm "
    "auto|nccl|mpi] "
    "[--tensorboard DIR] "
    "[--metrics-jsonl FILE] [--print-plan]\n"
    "--micro K is a count, not a size: each rank runs its share of a step as K micro-batches (gradient "
    "accumulation; GRPO splits the rank's sequences into K). Without --micro the job is sized by the planner "
    "for --memory-gb per rank (default 4): gradient accumulation, and activation checkpointing unless "
    "--checkpointing is given.";
// (kGrpoUsage, grpo_cli.h, lists the flags of --task grpo.)

struct Cli {
  // The flags a job spec also has, as a JobSpec: jobspec::Resolve turns it into the plan the coordinator's
  // workers would get for the same spec (one resolver), and OptionsFromPlan into the trainer's options.
  jobspec::JobSpec spec;
  bool print_plan = false;  // --print-plan: print the resolved plan (as `zerofit status --plan`) and exit
  // How the ranks run the plan (threads, attention kernel, gradient buckets, device communicator): the flags
  // that change no trained value. Every other flag is a field of `spec`.
  RuntimeOptions runtime;
  // --ref: the reference pinned for the resolver (jobspec::ReferenceOf); unset: its default.
  std::optional<ReferenceStrategy> reference;
  int64_t log_every = 10;
  // Without --micro the planner sizes the job (accumulation, and checkpointing unless --checkpointing) for
  // this many GB per rank on the CPU.
  bool sized_by_user = false;
  double memory_gb = 4;
};

// Where the model and pairs come from: --data DIR (config.json and the token-id files of
// examples/make_arith_prefs), or --model DIR --train FILE [--test FILE] [--tokenizer DIR] [--eos-token T]
// [--chat-template P] (text, conversational or token-id JSONL; the tokenizer defaults to the model
// directory's tokenizer.json; the spec's data.eos_token and data.chat_template change it).
absl::Status ParseDataFlags(const std::function<std::string(const char*)>& take, jobspec::JobSpec* p) {
  const std::string dir = take("--data"), model = take("--model"), train = take("--train");
  if (dir.empty() == model.empty() || model.empty() != train.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("give either --data DIR or --model DIR with --train FILE\n", kUsage));
  }
  if (!dir.empty()) {
    p->model = dir;
    p->data.dir = dir;
  } else {
    p->model = model;
    p->data.train = train;
    p->data.test = take("--test");
    p->data.tokenizer = take("--tokenizer");  // empty: the model directory's tokenizer.json, if any
    p->data.eos_token = take("--eos-token");
    p->data.chat_template = take("--chat-template");
  }
  if (const std::string v = take("--add-bos"); !v.empty()) {
    ZF_RETURN_IF_ERROR(data::ParseAddBos(v, "flag --add-bos").status());
    p->data.add_bos = v;
  }
  if (const std::string v = take("--max-prompt-length"); !v.empty()) {
    if (!absl::SimpleAtoi(v, &p->data.max_prompt_length) || p->data.max_prompt_length < 1) {
      return absl::InvalidArgumentError(absl::StrCat("flag --max-prompt-length: '", v, "' is not >= 1"));
    }
  }
  return absl::OkStatus();
}

// The hardware the job is resolved on: the spec's default when the flags size it (--micro), so that its
// plan equals a spec's byte for byte; otherwise the CPU ranks with --memory-gb each, as the planner sizes
// them. The trainer flags the planner must know are pinned (TrainerFacts).
absl::StatusOr<jobspec::JobPlan> ResolveForRanks(const Cli& cli, int world) {
  jobspec::JobSpec spec = cli.spec;
  spec.world_size = world;
  jobspec::TrainerFacts facts;
  if (cli.reference) facts.reference = PlannerReference(*cli.reference);
  if (cli.sized_by_user) {
    ZF_ASSIGN_OR_RETURN(const planner::Hardware spec_hw, jobspec::HardwareOf(spec));
    return jobspec::Resolve(spec, spec_hw, {}, facts);
  }
  ZF_ASSIGN_OR_RETURN(planner::Hardware hw, planner::ParseHardware("cpu"));
  hw.gpu_bytes = cli.memory_gb * planner::kGB;
  hw.gpus_per_node = world;
  facts.safety = 1.0;
  facts.bucket_bytes = cli.runtime.bucket_bytes;
  return jobspec::Resolve(spec, hw, {}, facts);
}

using Take = std::function<std::string(const char*)>;
using Number = std::function<absl::Status(const char*, double*, double)>;

// The `training:` section's flags, into `t` (defaults as PreferenceTrainOptions').
absl::Status ParseTrainingFlags(const Take& take, const Number& number, jobspec::TrainingSpec* t) {
  const PreferenceTrainOptions d;
  double steps = static_cast<double>(d.steps), gb = static_cast<double>(d.global_batch), micro = 0,
         lr = d.schedule.peak_lr, wd = d.weight_decay, maxlen = static_cast<double>(d.max_length), warmup = 0,
         min_lr = 0;
  ZF_RETURN_IF_ERROR(number("--steps", &steps, 1));
  ZF_RETURN_IF_ERROR(number("--global-batch", &gb, 1));
  ZF_RETURN_IF_ERROR(number("--micro", &micro, 1));
  ZF_RETURN_IF_ERROR(number("--lr", &lr, 0));
  ZF_RETURN_IF_ERROR(number("--weight-decay", &wd, 0));
  ZF_RETURN_IF_ERROR(number("--max-length", &maxlen, 4));
  ZF_RETURN_IF_ERROR(number("--warmup-steps", &warmup, 0));
  ZF_RETURN_IF_ERROR(number("--min-lr", &min_lr, 0));
  t->steps = static_cast<int64_t>(steps);
  t->global_batch = static_cast<int64_t>(gb);
  if (micro > 0) t->gradient_accumulation = static_cast<int64_t>(micro);  // --micro K: K micro-batches
  t->lr = static_cast<float>(lr);  // the trainer's rates are fp32: the plan holds what it applies
  t->weight_decay = wd;
  t->max_grad_norm = d.max_grad_norm;
  t->max_length = static_cast<int64_t>(maxlen);
  t->warmup_steps = static_cast<int64_t>(warmup);
  t->min_lr = static_cast<float>(min_lr);
  if (std::string decay = take("--lr-schedule"); !decay.empty()) {
    ZF_ASSIGN_OR_RETURN(t->lr_schedule, core::ParseLrDecay(decay));
  }
  if (absl::Status s = core::ValidateLrSchedule(jobspec::LrScheduleOf(*t)); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("flags --lr/--lr-schedule/--warmup-steps/--min-lr: ", s.message()));
  }
  if (std::string optim = take("--optim"); !optim.empty()) {
    auto kind = jobspec::ParseOptimizerName(optim);
    if (!kind.ok())
      return absl::InvalidArgumentError(absl::StrCat("flag --optim: ", kind.status().message()));
    t->optimizer.kind = *kind;
  }
  double min_8bit = static_cast<double>(t->optimizer.min_8bit_size);
  ZF_RETURN_IF_ERROR(number("--min-8bit-size", &min_8bit, 0));
  t->optimizer.min_8bit_size = static_cast<int64_t>(min_8bit);
  if (std::string dtype = take("--dtype"); !dtype.empty()) {
    if (dtype != "bf16" && dtype != "fp32") {
      return absl::InvalidArgumentError(absl::StrCat("flag --dtype: '", dtype, "' is not fp32 or bf16"));
    }
    t->bf16 = dtype == "bf16";
  }
  return absl::OkStatus();
}

// The flags a job spec also has, into `p` (defaults as PreferenceTrainOptions'). `offload` and
// `checkpointing` are the boolean flags.
absl::Status ParseSpecFlags(const Take& take, const Number& number, bool offload, bool checkpointing,
                            jobspec::JobSpec* p) {
  const std::string task = take("--task");
  if (task.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--task is required\n", kUsage, "\n", kGrpoUsage));
  }
  ZF_RETURN_IF_ERROR(ParseTask(task).status());
  p->name = "zerofit_train_prefs";
  p->task = task;
  ZF_RETURN_IF_ERROR(ParseDataFlags(take, p));
  ZF_RETURN_IF_ERROR(ParseTrainingFlags(take, number, &p->training));
  double eval_every = 0, eval_max = 0;
  ZF_RETURN_IF_ERROR(number("--eval-every", &eval_every, 0));
  ZF_RETURN_IF_ERROR(number("--eval-max-samples", &eval_max, 0));
  p->eval.every = static_cast<int64_t>(eval_every);
  p->eval.max_samples = static_cast<int64_t>(eval_max);
  p->training.offload = offload;
  if (checkpointing) p->training.checkpointing = true;
  if (std::string device = take("--device"); !device.empty()) {
    if (auto choice = device::ParseDeviceChoice(device); !choice.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("flag --device: ", choice.status().message()));
    }
    p->device = device;
  }
  p->metrics.tensorboard = take("--tensorboard");
  p->metrics.jsonl = take("--metrics-jsonl");
  p->export_dir = take("--export");
  if (task == "grpo") ZF_RETURN_IF_ERROR(ParseGrpoFlags(take, number, p->training.max_length, &p->grpo));
  return absl::OkStatus();
}

// --center-rewards-coefficient: the spec's `reward` section (task reward only).
absl::Status ParseRewardFlags(const Take& take, const Number& number, jobspec::JobSpec* p) {
  const char* flag = "--center-rewards-coefficient";
  if (p->task != "reward") {
    if (take(flag).empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("flag ", flag, " applies to --task reward only"));
  }
  ZF_RETURN_IF_ERROR(number(flag, &p->reward.center_rewards_coefficient, 0));
  return jobspec::ValidateRewardLossSpec(p->reward, [&](const std::string&, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("flag ", flag, ": ", why));
  });
}

// --completion-only-loss and --assistant-only-loss true|false: the spec's `sft` section (task sft only).
absl::Status ParseSftFlags(const Take& take, jobspec::JobSpec* p) {
  const std::pair<const char*, bool*> flags[] = {{"--completion-only-loss", &p->sft.completion_only_loss},
                                                 {"--assistant-only-loss", &p->sft.assistant_only_loss}};
  for (const auto& [flag, out] : flags) {
    const std::string value = take(flag);
    if (value.empty()) continue;
    if (p->task != "sft")
      return absl::InvalidArgumentError(absl::StrCat("flag ", flag, " applies to --task sft only"));
    if (value != "true" && value != "false") {
      return absl::InvalidArgumentError(absl::StrCat("flag ", flag, ": '", value, "' is not true or false"));
    }
    *out = value == "true";
  }
  return absl::OkStatus();
}

// --beta, --loss, --label-smoothing, --simpo-gamma, --discopop-tau, --ld-alpha, --rpo-alpha and
// --reference-free: the spec's `dpo` section (task dpo only; refused for the others).
absl::Status ParseDpoFlags(const Take& take, const Number& number, jobspec::JobSpec* p) {
  if (p->task != "dpo") {
    for (const char* flag : {"--beta", "--loss", "--label-smoothing", "--simpo-gamma", "--discopop-tau",
                             "--ld-alpha", "--rpo-alpha", "--reference-free"}) {
      if (!take(flag).empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("flag ", flag, " applies to --task dpo only",
                         p->task == "grpo" ? " (GRPO's KL coefficient: --kl-beta)" : ""));
      }
    }
    return absl::OkStatus();
  }
  jobspec::DpoSpec& d = p->dpo;
  ZF_RETURN_IF_ERROR(number("--beta", &d.beta, 0));
  ZF_RETURN_IF_ERROR(number("--label-smoothing", &d.label_smoothing, 0));
  ZF_RETURN_IF_ERROR(number("--simpo-gamma", &d.simpo_gamma, 0));
  ZF_RETURN_IF_ERROR(number("--discopop-tau", &d.discopop_tau, 0));
  ZF_RETURN_IF_ERROR(number("--ld-alpha", &d.ld_alpha, 0));
  ZF_RETURN_IF_ERROR(number("--rpo-alpha", &d.rpo_alpha, 0));
  if (std::string loss = take("--loss"); !loss.empty()) d.loss_type = loss;
  if (const std::string free = take("--reference-free"); !free.empty()) {
    if (free != "true" && free != "false") {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --reference-free: '", free, "' is not true or false"));
    }
    d.reference_free = free == "true";
  }
  return jobspec::ValidateDpoSpec(d, [](const std::string& field, const std::string& why) {
    const std::string flag = field == "dpo.beta"           ? "beta"
                             : field == "dpo.loss_type"    ? "loss"
                             : field == "dpo.simpo_gamma"  ? "simpo-gamma"
                             : field == "dpo.rpo_alpha"    ? "rpo-alpha"
                             : field == "dpo.discopop_tau" ? "discopop-tau"
                             : field == "dpo.ld_alpha"     ? "ld-alpha"
                                                           : "label-smoothing";
    return absl::InvalidArgumentError(absl::StrCat("flag --", flag, ": ", why));
  });
}

// The flags of the spec's fields besides the training section's: seed, LoRA, DPO, the delayed update,
// the initial weights, the reference.
absl::Status ParseOtherSpecFlags(const Take& take, const Number& number, Cli* cli) {
  jobspec::JobSpec& p = cli->spec;
  double seed = static_cast<double>(p.training.seed), rank = 0, alpha = p.lora.alpha, dpu_start = -1;
  ZF_RETURN_IF_ERROR(number("--seed", &seed, 0));
  ZF_RETURN_IF_ERROR(number("--lora-rank", &rank, 0));
  ZF_RETURN_IF_ERROR(number("--lora-alpha", &alpha, 0));
  ZF_RETURN_IF_ERROR(number("--dpu-start", &dpu_start, 0));
  p.training.seed = static_cast<int64_t>(seed);
  if (rank > 0) {  // the job spec's `lora` section, with PEFT's default target modules (q, k, v, o)
    p.lora.rank = static_cast<int64_t>(rank);
    p.lora.alpha = alpha;
    ZF_RETURN_IF_ERROR(
        jobspec::ValidateLoraSpec(p.lora, [](const std::string& field, const std::string& why) {
          return absl::InvalidArgumentError(
              absl::StrCat("flag --", field == "lora.rank" ? "lora-rank" : "lora-alpha", ": ", why));
        }));
  }
  if (dpu_start >= 0) {  // the delayed parameter update (ZeRO-Offload's DPU) from optimizer step N on
    if (!p.training.offload) return absl::InvalidArgumentError("flag --dpu-start needs --offload");
    p.training.delayed_update_from = static_cast<int64_t>(dpu_start);
  }
  ZF_RETURN_IF_ERROR(ParseDpoFlags(take, number, &p));
  ZF_RETURN_IF_ERROR(ParseRewardFlags(take, number, &p));
  ZF_RETURN_IF_ERROR(ParseSftFlags(take, &p));
  if (std::string ref = take("--ref"); !ref.empty()) {
    ZF_ASSIGN_OR_RETURN(cli->reference, ParseReferenceStrategy(ref));
  }
  p.init = take("--init");
  return absl::OkStatus();
}

// The flags that change how the ranks run, not what they train (RuntimeOptions), and the output's.
absl::Status ParseRuntimeFlags(const Take& take, const Number& number, Cli* cli) {
  RuntimeOptions& o = cli->runtime;
  double threads = o.offload_threads, log_every = static_cast<double>(cli->log_every);
  ZF_RETURN_IF_ERROR(number("--memory-gb", &cli->memory_gb, 0.01));
  ZF_RETURN_IF_ERROR(number("--threads", &threads, 1));
  ZF_RETURN_IF_ERROR(number("--log-every", &log_every, 1));
  o.offload_threads = static_cast<int>(threads);
  cli->log_every = static_cast<int64_t>(log_every);
  if (std::string attention = take("--attention"); !attention.empty()) {
    // Resolved here too, so that sdpa on a LibTorch without it fails before any rank loads data.
    absl::StatusOr<AttentionKernel> parsed = ParseAttentionKernel(attention);
    if (parsed.ok()) parsed = ResolveAttentionKernel(*parsed);
    if (!parsed.ok())
      return absl::Status(parsed.status().code(),
                          absl::StrCat("flag --attention: ", parsed.status().message()));
    o.attention = *parsed;
  }
  if (std::string fused = take("--fused-kernels"); !fused.empty()) {
    ZF_ASSIGN_OR_RETURN(o.fused_kernels, ParseFusedKernels(fused, "flag --fused-kernels"));
  }
  if (std::string dc = take("--device-comm"); !dc.empty()) {
    auto parsed = comm::ParseDeviceComm(dc);
    if (!parsed.ok())
      return absl::InvalidArgumentError(absl::StrCat("flag --device-comm: ", parsed.status().message()));
    o.device_comm = *parsed;
  }
  o.cuda_allocation_report = take("--cuda-allocation-report");
  if (!o.cuda_allocation_report.empty() && cli->spec.task != "grpo") {
    return absl::InvalidArgumentError("flag --cuda-allocation-report applies to --task grpo only");
  }
  return absl::OkStatus();
}

absl::StatusOr<Cli> Parse(int argc, char** argv) {
  Cli cli;
  std::map<std::string, std::string> values;
  bool offload = false, reduce_once = false, checkpointing = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") return absl::CancelledError(kUsage);
    if (a == "--offload") {
      offload = true;
    } else if (a == "--reduce-once") {
      reduce_once = true;
    } else if (a == "--checkpointing") {
      checkpointing = true;
    } else if (a == "--print-plan") {
      cli.print_plan = true;
    } else if (a.rfind("--", 0) == 0 && i + 1 < argc) {
      values[a] = argv[++i];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown or incomplete flag '", a, "'\n", kUsage));
    }
  }
  Take take = [&](const char* name) -> std::string {
    auto it = values.find(name);
    if (it == values.end()) return "";
    std::string v = it->second;
    values.erase(it);
    return v;
  };
  Number number = [&](const char* name, double* out, double lo) -> absl::Status {
    const std::string v = take(name);
    if (v.empty()) return absl::OkStatus();
    char* end = nullptr;
    const double d = std::strtod(v.c_str(), &end);
    if (end == v.c_str() || *end != '\0' || !(d >= lo)) {
      return absl::InvalidArgumentError(absl::StrCat("flag ", name, ": '", v, "' is not a number >= ", lo));
    }
    *out = d;
    return absl::OkStatus();
  };
  cli.sized_by_user = values.count("--micro") > 0;
  ZF_RETURN_IF_ERROR(ParseSpecFlags(take, number, offload, checkpointing, &cli.spec));
  if (reduce_once) cli.runtime.accumulation_mode = sharding::AccumulationMode::kReduceOncePerStep;
  ZF_RETURN_IF_ERROR(ParseOtherSpecFlags(take, number, &cli));
  ZF_RETURN_IF_ERROR(ParseRuntimeFlags(take, number, &cli));
  if (!values.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown flag '", values.begin()->first, "'\n", kUsage, "\n", kGrpoUsage));
  }
  return cli;
}

// What the run prints: rank 0's lines (data report, evaluations, a step line every --log-every steps).
// The held-out figure of a task: an accuracy for reward models and DPO; SFT's completions have nothing to
// be ranked against, so its figure is the perplexity (the exp of the loss per completion token).
std::string HeldOutFigure(PreferenceTrainOptions::Task task, const PairMetrics& m) {
  const double n = std::max(m.pairs, 1.0);
  switch (task) {
    case PreferenceTrainOptions::Task::kSft: {
      const double per_token = SftLossPerToken(m);
      return absl::StrFormat("perplexity %.3f, token accuracy %.3f", std::exp(per_token),
                             SftTokenAccuracy(m));
    }
    case PreferenceTrainOptions::Task::kDpo:  // and whether the chosen answers stay likely (dpo/nll_loss)
      return absl::StrFormat("implicit-reward accuracy %.3f, chosen NLL per token %.3f", m.correct / n,
                             m.nll_sum / std::max(m.response_tokens, 1.0));
    case PreferenceTrainOptions::Task::kReward:
    case PreferenceTrainOptions::Task::kGrpo:
      break;
  }
  return absl::StrFormat("pairwise accuracy %.3f", m.correct / n);
}

const char* SampleName(PreferenceTrainOptions::Task task) {
  return task == PreferenceTrainOptions::Task::kSft ? "examples" : "pairs";
}

void PrintStepLine(const StepReport& r, PreferenceTrainOptions::Task task, int64_t steps, double elapsed_s) {
  const int64_t done = r.step + 1;  // steps are 0-based; people count from 1
  const std::string device =
      r.peak.device_reserved > 0
          ? absl::StrFormat("%.0f/%.0f MiB device (allocated/reserved), ",
                            r.peak.device_allocated / 1048576.0, r.peak.device_reserved / 1048576.0)
          : "";
  const PairMetrics& m = r.metrics;
  const bool sft = task == PreferenceTrainOptions::Task::kSft;
  const std::string figures =
      sft ? absl::StrFormat("ppl %.3f  tok-acc %.3f", std::exp(SftLossPerToken(m)), SftTokenAccuracy(m))
          : absl::StrFormat("acc %.3f  margin %.3f", m.correct / m.pairs, m.margin_sum / m.pairs);
  std::printf(
      "step %4lld/%lld  loss %.4f  %s  grad-norm %.3f  lr %.2e  %.1f %s/s  peak %s%.0f MiB host  ETA %.0fs\n",
      static_cast<long long>(done), static_cast<long long>(steps), MeanLoss(m, sft), figures.c_str(),
      r.result.grad_norm, r.lr, m.pairs / (r.result.breakdown.wall_ms / 1e3), SampleName(task),
      device.c_str(), r.peak.host_rss / 1048576.0, elapsed_s / done * (steps - done));
  std::fflush(stdout);
}

// The trainer's hooks: every rank records its metrics; rank 0 prints.
TrainHooks MakeHooks(const PreferenceTrainOptions& o, int64_t log_every, int rank,
                     metrics::MetricsRecorder* recorder, absl::Time start) {
  TrainHooks hooks;
  hooks.on_start = [&o, rank](const PreferenceSession& session, const EvalReport& before) {
    if (rank != 0) return absl::OkStatus();
    std::printf("%s", data::FormatDataReport(session.data_report(), o.data.train, false).c_str());
    if (before.metrics.pairs > 0) {
      std::printf("held-out %s before training (%.0f %s)\n", HeldOutFigure(o.task, before.metrics).c_str(),
                  before.metrics.pairs, SampleName(o.task));
    } else {
      std::printf("no held-out %s: nothing is evaluated (give --test FILE)\n", SampleName(o.task));
    }
    std::fflush(stdout);
    return absl::OkStatus();
  };
  hooks.on_step = [&o, log_every, rank, recorder, start](const StepReport& r) -> absl::Status {
    const metrics::StepMetrics named = NamedStepMetrics(
        r, o.task,
        HostSample{rank, absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()), HostPeakRssBytes()});
    ZF_ASSIGN_OR_RETURN(const std::vector<std::string> warnings, recorder->Record(named));
    if (rank != 0) return absl::OkStatus();
    for (const std::string& w : warnings) std::fprintf(stderr, "%s\n", w.c_str());
    const int64_t done = r.step + 1;
    if (r.eval && r.eval->metrics.pairs > 0) {
      const PairMetrics& m = r.eval->metrics;
      std::printf("eval after step %lld: held-out %s  loss %.4f (%.0f %s)\n", static_cast<long long>(done),
                  HeldOutFigure(o.task, m).c_str(), MeanLoss(m, o.task == PreferenceTrainOptions::Task::kSft),
                  m.pairs, SampleName(o.task));
    }
    if (done % log_every == 0 || done == o.steps) {
      PrintStepLine(r, o.task, o.steps, absl::ToDoubleSeconds(absl::Now() - start));
    }
    return absl::OkStatus();
  };
  return hooks;
}

void PrintSummary(const PreferenceTrainOptions& o, const TrainReport& report, absl::Time start) {
  const bool sft = o.task == PreferenceTrainOptions::Task::kSft;
  if (report.after.metrics.pairs > 0) {
    std::printf("held-out %s before training, %s after (%.0f %s); loss %.4f -> %.4f\n",
                HeldOutFigure(o.task, report.before.metrics).c_str(),
                HeldOutFigure(o.task, report.after.metrics).c_str(), report.after.metrics.pairs,
                SampleName(o.task), MeanLoss(report.before.metrics, sft),
                MeanLoss(report.after.metrics, sft));
  }
  const bool dpo = o.task == PreferenceTrainOptions::Task::kDpo && DpoNeedsReference(o.dpo);
  std::printf("optimizer state %.2f MiB/rank, reference on device %.2f MiB (%s), %.1f s\n",
              report.memory.optimizer_state_bytes() / 1048576.0, report.reference_device_bytes / 1048576.0,
              dpo ? ReferenceStrategyName(o.reference) : "none", absl::ToDoubleSeconds(absl::Now() - start));
  if (!o.export_dir.empty()) std::printf("exported Hugging Face model to %s\n", o.export_dir.c_str());
}

absl::Status Run(const comm::MpiEnvironment& env, const Cli& cli) {
  torch::set_num_threads(1);
  ZF_ASSIGN_OR_RETURN(auto comm, comm::CreateHostCommunicator(env));
  const int rank = comm->rank();
  // The GPU of this rank: cuda:<local rank> (mpiexec's or srun's view of this process).
  ZF_ASSIGN_OR_RETURN(const launch::LaunchEnv launched, launch::ReadLaunchEnv(&std::getenv));
  // Every rank resolves the same plan (a pure function of the flags and the world size); rank 0 reports it.
  ZF_ASSIGN_OR_RETURN(const jobspec::JobPlan plan, ResolveForRanks(cli, comm->world_size()));
  if (cli.print_plan) {
    if (rank == 0) std::printf("%s", jobspec::JobPlanToJson(plan).c_str());
    return absl::OkStatus();
  }
  if (rank == 0 && !cli.sized_by_user) {
    std::printf("plan (%.1f GB per rank): %s\n", cli.memory_gb, plan.sizing.c_str());
  }
  ZF_ASSIGN_OR_RETURN(const PreferenceTrainOptions o, OptionsFromPlan(plan));
  // As zerofit_worker does: a missing input, an export that could not be written or would replace the model.
  ZF_RETURN_IF_ERROR(data::CheckJobFiles(plan, rank));
  RuntimeOptions runtime = cli.runtime;
  runtime.local_rank = launched.local_rank;
  const absl::Time start = absl::Now();
  char hostname[256] = {0};
  ::gethostname(hostname, sizeof(hostname) - 1);
  metrics::RecorderOptions ro;
  if (rank == 0) {
    ro.tensorboard_dir = plan.metrics.tensorboard;
    ro.jsonl_path = plan.metrics.jsonl;
  }
  ro.hostname = hostname;
  ro.now_unix_s = absl::ToDoubleSeconds(start - absl::UnixEpoch());
  ro.alarms.reward_model = o.task == PreferenceTrainOptions::Task::kReward;
  ro.alarms.rank = rank;
  ZF_ASSIGN_OR_RETURN(std::unique_ptr<metrics::MetricsRecorder> recorder,
                      metrics::MetricsRecorder::Create(ro));
  if (o.task == PreferenceTrainOptions::Task::kGrpo)
    return RunGrpo(o, runtime, cli.log_every, comm.get(), recorder.get());
  const TrainHooks hooks = MakeHooks(o, cli.log_every, rank, recorder.get(), start);
  ZF_ASSIGN_OR_RETURN(TrainReport report, TrainPreferences(o, runtime, comm.get(), hooks));
  if (rank == 0) PrintSummary(o, report, start);
  return absl::OkStatus();
}

}  // namespace
}  // namespace zerofit::worker

int main(int argc, char** argv) {
  return zerofit::worker::MpiMain(argc, argv, &zerofit::worker::Parse, &zerofit::worker::Run);
}
