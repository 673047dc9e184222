#include "worker/torch/train/grpo_session.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/hf_config.h"
#include "core/lr_schedule.h"
#include "core/status_macros.h"
#include "jobspec/step_scheduler.h"
#include "sharding/checkpoint.h"
#include "worker/data/hf_tokenizer.h"
#include "worker/data/prompt_dataset.h"
#include "worker/data/stop_tokens.h"
#include "worker/data/training_data.h"
#include "worker/torch/model/generation.h"
#include "worker/torch/model/kv_cache.h"
#include "worker/torch/train/cuda_allocations.h"
#include "worker/torch/train/entropy_quantile.h"
#include "worker/torch/train/grpo_rows.h"
#include "worker/torch/train/host_to_device.h"
#include "worker/torch/train/named_step_metrics.h"
#include "worker/torch/train/pair_tensors.h"
#include "worker/torch/train/rollout_scorer.h"
#include "worker/torch/train/session_setup.h"

namespace zerofit::worker {

namespace {

namespace names = metrics::metric_names;

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The step's sampling seed: SplitMix64 of (seed, step), so consecutive steps draw unrelated samples.
uint64_t StepSeed(uint64_t seed, int64_t step) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(step) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::vector<int64_t> Widen(const std::vector<int32_t>& ids) { return {ids.begin(), ids.end()}; }

absl::Status AllReduce(std::vector<double>* v, comm::ReduceOp op, comm::Communicator* comm) {
  return comm::WaitFor(comm->AllReduce(comm::Buffer{v->data(), v->size(), core::DType::kFloat64}, op),
                       comm->options().timeout);
}

// Groups (`size` consecutive rewards) whose rewards are all equal: no advantage, nothing to learn.
int64_t FlatGroups(const std::vector<double>& rewards, int64_t size) {
  int64_t flat = 0;
  for (size_t g = 0; g + static_cast<size_t>(size) <= rewards.size(); g += static_cast<size_t>(size)) {
    const auto first = rewards.begin() + static_cast<std::ptrdiff_t>(g);
    flat += std::all_of(first, first + size, [&](double v) { return v == *first; }) ? 1 : 0;
  }
  return flat;
}

}  // namespace

absl::Status ValidateGrpoOptions(const PreferenceTrainOptions& o) {
  const GrpoTaskOptions& g = o.grpo;
  auto bad = [](const char* field, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
  };
  if (g.rollout.samples_per_prompt < 2) {
    return bad("rollout.samples_per_prompt", "must be >= 2 (advantages are relative to the prompt's group)");
  }
  if (g.rollout.max_new_tokens < 1) return bad("rollout.max_new_tokens", "must be >= 1");
  if (!(g.rollout.temperature > 0) || !std::isfinite(g.rollout.temperature)) {
    return bad("rollout.temperature", "must be > 0 (the group needs diverse samples; evaluation is greedy)");
  }
  if (!(g.rollout.top_p > 0 && g.rollout.top_p <= 1)) return bad("rollout.top_p", "must be in (0, 1]");
  if (g.rollout.top_k < 0) return bad("rollout.top_k", "must be >= 0 (0: every token)");
  if (!(g.rollout.min_p >= 0 && g.rollout.min_p <= 1)) return bad("rollout.min_p", "must be in [0, 1]");
  if (g.rollout.rollout_batch < 0) return bad("rollout.batch", "must be >= 0 (0: one pass)");
  if (g.iterations < 1) return bad("grpo.iterations", "must be >= 1");
  if (!(g.top_entropy_quantile > 0 && g.top_entropy_quantile <= 1))
    return bad("grpo.top_entropy_quantile", "must be in (0, 1] (1: every token)");
  if (g.rewards.empty()) return bad("rewards", "at least one reward source is needed");
  if (g.objective.beta > 0 && o.reference != ReferenceStrategy::kResident &&
      o.reference != ReferenceStrategy::kLoraBase) {
    return bad("reference", absl::StrCat(ReferenceStrategyName(o.reference),
                                         ": GRPO keeps its reference resident or as the LoRA base"));
  }
  if (g.objective.beta > 0) {
    ZF_RETURN_IF_ERROR(CheckReferenceStrategy(o.reference, o.model.lora));
  }
  if (o.max_length <= g.rollout.max_new_tokens) {
    return bad("training.max_length",
               absl::StrCat(o.max_length, " leaves no room for a prompt besides max_new_tokens ",
                            g.rollout.max_new_tokens));
  }
  return absl::OkStatus();
}

int64_t SequencesInFlight(const RolloutOptions& r, int64_t prompts_per_rank) {
  const int64_t sequences = prompts_per_rank * r.samples_per_prompt;
  return r.rollout_batch > 0 ? std::min(r.rollout_batch, sequences) : sequences;
}

int64_t PlannedKvCacheBytes(const PreferenceTrainOptions& o, int64_t prompts_per_rank, int64_t prompt_length,
                            const core::HfModelConfig& config) {
  const RolloutOptions& r = o.grpo.rollout;
  const int64_t in_flight = SequencesInFlight(r, prompts_per_rank);
  const int64_t element = o.model.dtype == torch::kFloat32 ? 4 : 2;
  return KvCacheBytes(config, in_flight, prompt_length + r.max_new_tokens, element);
}

struct GrpoSession::State {
  comm::Communicator* comm = nullptr;
  TrainingBackend backend;
  core::HfModelConfig config;                        // as the model resolved it (head_dim, kv heads)
  std::shared_ptr<const data::Tokenizer> tokenizer;  // null for pre-tokenized prompts
  data::PromptData train, test;
  std::vector<int64_t> eos_ids;
  int32_t pad = 0;
  LlamaModel policy{nullptr};
  // beta > 0 only: the frozen initial policy, a copy; or with lora-base the policy itself, whose adapters
  // TrainingRows disables for the reference log-probs.
  LlamaModel reference{nullptr};
  std::unique_ptr<Zero2Binding> binding;
  std::unique_ptr<RolloutScorer> scorer;
  KvCache cache;  // one rollout's: reused by its passes when the next fits, released before training
  std::unique_ptr<CudaAllocationReport> allocations;  // RuntimeOptions.cuda_allocation_report's, or null
};

// One step's rollout on this rank: its prompts micro-batch by micro-batch, G completions each.
struct GrpoSession::Rollout {
  std::vector<const data::Prompt*> prompts;  // per completion
  std::vector<Completion> completions;
  ScoredRollout scored;
  std::vector<double> advantages;
  GenerationStats stats;
  int64_t zero_std_groups = 0;  // groups whose rewards were all equal
  double generation_ms = 0, training_ms = 0;
  sharding::StepResult last;   // the last optimizer step's result
  torch::Tensor sums;          // [loss_sum, units, kl_sum, clipped, tokens] of the last iteration
  PeakMemory generation_peak;  // the device peak of the rollout pass (the training pass's is read after it)
};

GrpoSession::GrpoSession(std::unique_ptr<State> state, const PreferenceTrainOptions& options,
                         const RuntimeOptions& runtime)
    : state_(std::move(state)), options_(options), runtime_(runtime) {}

GrpoSession::~GrpoSession() = default;

namespace {

// add_bos unset: the tokenizer's own rule (data::AutoAddBos), true for pre-tokenized prompts.
absl::StatusOr<data::PromptData> LoadPromptFile(const std::string& path, const data::HfTokenizer* tok,
                                                const PreferenceTrainOptions& o,
                                                const core::HfModelConfig& c) {
  data::PromptDataOptions po;
  po.max_prompt_length = o.max_length - o.grpo.rollout.max_new_tokens;
  po.add_bos = o.data.add_bos.value_or(tok != nullptr ? data::AutoAddBos(*tok, path) : true);
  po.bos_id = c.bos_token_id ? static_cast<int32_t>(*c.bos_token_id) : -1;
  po.vocab_size = static_cast<int32_t>(c.vocab_size);
  return data::LoadPrompts(path, tok, po);
}

// RuntimeOptions.cuda_allocation_report on every rank (each its own file), so that a run on the CPU fails on
// all of them before any collective.
absl::StatusOr<std::unique_ptr<CudaAllocationReport>> OpenAllocationReport(const RuntimeOptions& runtime,
                                                                           int rank,
                                                                           const TrainingBackend& backend) {
  if (runtime.cuda_allocation_report.empty()) return std::unique_ptr<CudaAllocationReport>();
  const std::string path = rank == 0 ? runtime.cuda_allocation_report
                                     : absl::StrCat(runtime.cuda_allocation_report, ".rank", rank);
  absl::StatusOr<std::unique_ptr<CudaAllocationReport>> report =
      CudaAllocationReport::Open(path, backend.torch_device);
  if (report.ok()) return report;
  return absl::Status(report.status().code(), absl::StrCat("--cuda-allocation-report (RuntimeOptions."
                                                           "cuda_allocation_report): ",
                                                           report.status().message()));
}

absl::Status ReportAllocations(CudaAllocationReport* report, int64_t step, const char* point) {
  return report != nullptr ? report->Write(step, point) : absl::OkStatus();
}

// A pass's peak starts here: the allocator's and the seam's counters, and the report's peak live set.
void ResetPeaks(const TrainingBackend& backend, CudaAllocationReport* report) {
  ResetPeakMemory(backend);
  if (report != nullptr) report->ResetPeak();
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpoSession>> GrpoSession::Create(const PreferenceTrainOptions& o,
                                                                 const RuntimeOptions& runtime,
                                                                 comm::Communicator* comm) {
  ZF_RETURN_IF_ERROR(ValidateGrpoOptions(o));
  ZF_RETURN_IF_ERROR(core::ValidateLrSchedule(EffectiveSchedule(o)));
  auto st = std::make_unique<State>();
  st->comm = comm;
  ZF_ASSIGN_OR_RETURN(core::HfModelConfig config, LoadModelConfig(o));
  ZF_ASSIGN_OR_RETURN(std::shared_ptr<const data::HfTokenizer> tok, data::LoadDataTokenizer(o.data));
  st->tokenizer = tok;
  ZF_ASSIGN_OR_RETURN(st->train, LoadPromptFile(o.data.train, tok.get(), o, config));
  if (!o.data.test.empty()) {
    ZF_ASSIGN_OR_RETURN(st->test, LoadPromptFile(o.data.test, tok.get(), o, config));
  }
  if (o.eval_max_samples > 0 && st->test.prompts.size() > static_cast<size_t>(o.eval_max_samples)) {
    st->test.prompts.resize(static_cast<size_t>(o.eval_max_samples));
  }
  ZF_ASSIGN_OR_RETURN(st->backend, SessionBackend(o, runtime, comm));
  // Before the models are built, so that their parameters' blocks carry stacks too.
  ZF_ASSIGN_OR_RETURN(st->allocations, OpenAllocationReport(runtime, comm->rank(), st->backend));
  ZF_ASSIGN_OR_RETURN(st->eos_ids,
                      data::StopTokenIds(o.model_dir, config, st->tokenizer ? st->tokenizer->eos_id() : -1));
  st->pad = BatchPadId(config);
  try {
    ZF_ASSIGN_OR_RETURN(const std::optional<core::SafetensorsModel> weights, OpenInitWeights(o));
    ZF_ASSIGN_OR_RETURN(st->policy, InitialModel(config, o, runtime, weights, st->backend.torch_device));
    if (o.grpo.objective.beta > 0 && o.reference == ReferenceStrategy::kLoraBase) {
      st->reference = st->policy;  // no second copy: the base under the adapters is the initial policy
    } else if (o.grpo.objective.beta > 0) {
      ZF_ASSIGN_OR_RETURN(st->reference, InitialModel(config, o, runtime, weights, st->backend.torch_device));
      for (torch::Tensor& p : st->reference->parameters()) p.set_requires_grad(false);
      st->reference->eval();
    }
    ZF_ASSIGN_OR_RETURN(st->binding, BindPolicy(st->policy, o, runtime, st->backend, comm,
                                                /*micro_batches_per_step=*/0));
    ZF_ASSIGN_OR_RETURN(st->scorer, RolloutScorer::Create(o.grpo.rewards, st->tokenizer, st->eos_ids,
                                                          config.vocab_size, st->backend.torch_device));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("building the GRPO session failed: ", e.what()));
  }
  ZF_RETURN_IF_ERROR(st->scorer->CheckPrompts(st->train.prompts, o.data.train));
  ZF_RETURN_IF_ERROR(st->scorer->CheckPrompts(st->test.prompts, o.data.test));
  st->config = st->policy->config();
  return std::unique_ptr<GrpoSession>(new GrpoSession(std::move(st), o, runtime));
}

int64_t GrpoSession::longest_prompt() const { return static_cast<int64_t>(state_->train.longest_prompt); }

int64_t GrpoSession::planned_kv_cache_bytes(int64_t prompts_per_rank) const {
  return PlannedKvCacheBytes(options_, prompts_per_rank, longest_prompt(), state_->config);
}

std::vector<int64_t> GrpoSession::TrainLengths() const {
  std::vector<int64_t> lengths;
  const RolloutOptions& r = options_.grpo.rollout;
  for (const data::Prompt& p : state_->train.prompts) {
    lengths.push_back(r.samples_per_prompt * (static_cast<int64_t>(p.ids.size()) + r.max_new_tokens));
  }
  return lengths;
}

std::string GrpoSession::DataReportText() const {
  const State& st = *state_;
  const RolloutOptions& r = options_.grpo.rollout;
  const int64_t world = st.comm->world_size();
  const int64_t prompts_per_rank = (options_.global_batch + world - 1) / world;
  const int64_t sequences = prompts_per_rank * r.samples_per_prompt;
  const int64_t in_flight = SequencesInFlight(r, prompts_per_rank);
  // auto names what it resolves to for the longest prompt's pass (Generate resolves it per call).
  const DecodeMode ran = ResolveDecodeMode(*st.policy, r.decode, longest_prompt() + r.max_new_tokens);
  const std::string decode = r.decode == DecodeMode::kAuto ? absl::StrCat("auto (", DecodeModeName(ran), ")")
                                                           : std::string(DecodeModeName(r.decode));
  return absl::StrCat("prompts: ", st.train.prompts.size(), " in ", options_.data.train, " (",
                      st.train.truncated, " truncated, longest ", st.train.longest_prompt, " tokens); ",
                      st.test.prompts.size(), " held out\n", "rollout: ", r.samples_per_prompt,
                      " samples per prompt, up to ", r.max_new_tokens, " new tokens, temperature ",
                      r.temperature, ", top_p ", r.top_p,
                      r.top_k > 0 ? absl::StrCat(", top_k ", r.top_k) : "",
                      r.min_p > 0 ? absl::StrCat(", min_p ", r.min_p) : "", ", decode ", decode, "\n",
                      "rollout batch: ", in_flight, " sequences per generation pass (", sequences,
                      " per rank per step); KV cache ", planned_kv_cache_bytes(prompts_per_rank),
                      " bytes per pass at the longest prompt\n", "reference: ", ReferenceText(), "\n");
}

std::string GrpoSession::ReferenceText() const {
  if (options_.grpo.objective.beta <= 0) return "none (grpo.beta 0: no KL penalty)";
  if (options_.reference == ReferenceStrategy::kLoraBase) {
    return "lora-base (the policy's frozen base with its LoRA adapters disabled; no copy)";
  }
  return absl::StrCat("resident (a frozen copy of the initial policy, ", state_->reference->parameter_bytes(),
                      " bytes)");
}

absl::StatusOr<GrpoSession::Rollout> GrpoSession::RunRollout(int64_t step, const MicroBatches& micro) {
  State& st = *state_;
  const RolloutOptions& r = options_.grpo.rollout;
  Rollout ro;
  std::vector<std::vector<int64_t>> inputs;
  GenerationOptions go;
  for (const std::vector<uint64_t>& batch : micro) {
    for (uint64_t p : batch) {
      if (p >= st.train.prompts.size()) {
        return absl::OutOfRangeError(
            absl::StrCat("Step: prompt ", p, " >= ", st.train.prompts.size(), " prompts"));
      }
      for (int64_t g = 0; g < r.samples_per_prompt; ++g) {
        ro.prompts.push_back(&st.train.prompts[p]);
        inputs.push_back(Widen(st.train.prompts[p].ids));
        go.sequence_ids.push_back(static_cast<int64_t>(p) * r.samples_per_prompt + g);
      }
    }
  }
  if (inputs.empty()) return ro;  // this rank has no prompts this step: it still joins the collectives
  go.max_new_tokens = r.max_new_tokens;
  go.temperature = r.temperature;
  go.top_p = r.top_p;
  go.top_k = r.top_k;
  go.min_p = r.min_p;
  go.eos_ids = st.eos_ids;
  go.pad_id = st.pad;
  go.seed = StepSeed(options_.seed, step);
  go.max_batch = r.rollout_batch > 0 ? r.rollout_batch : static_cast<int64_t>(inputs.size());
  go.decode = r.decode;
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<GenerationResult> generated = Generate(*st.policy, inputs, go, &st.cache);
  st.cache.Release();  // the training pass does not need it (the planner's passes: memory_model.h)
  ZF_ASSIGN_OR_RETURN(GenerationResult gen, std::move(generated));
  ro.generation_ms = MsSince(t0);
  ro.completions = std::move(gen.completions);
  ro.stats = gen.stats;
  ZF_ASSIGN_OR_RETURN(ro.scored, st.scorer->Score(ro.prompts, ro.completions));
  ro.zero_std_groups = FlatGroups(ro.scored.sum.total, r.samples_per_prompt);
  return ro;
}

namespace {

struct MeanAndStd {
  double mean = 0, std = 0;
};

// The mean and Bessel-corrected standard deviation of every rank's `values` of the step (two all-reduces, no
// cancellation): collective, every rank calls it, one without values too.
absl::StatusOr<MeanAndStd> StepMeanAndStd(const std::vector<double>& values, comm::Communicator* comm) {
  std::vector<double> sums = {static_cast<double>(values.size()),
                              std::accumulate(values.begin(), values.end(), 0.0)};
  ZF_RETURN_IF_ERROR(AllReduce(&sums, comm::ReduceOp::kSum, comm));
  MeanAndStd out;
  out.mean = sums[0] > 0 ? sums[1] / sums[0] : 0.0;
  std::vector<double> deviations = {0.0};
  for (double v : values) deviations[0] += (v - out.mean) * (v - out.mean);
  ZF_RETURN_IF_ERROR(AllReduce(&deviations, comm::ReduceOp::kSum, comm));
  out.std = BatchStd(deviations[0], sums[0]);
  return out;
}

}  // namespace

absl::Status GrpoSession::SetAdvantages(Rollout& ro) {
  if (KlInReward()) {  // Optimize sets them once the old and reference log-probs give the penalty
    ro.advantages.assign(ro.scored.sum.total.size(), 0.0);
    return absl::OkStatus();
  }
  if (options_.grpo.objective.rloo) return SetRlooAdvantages(ro, RlooRewards(ro));
  const std::vector<double>& total = ro.scored.sum.total;
  std::optional<double> batch_std;
  if (options_.grpo.objective.scale == RewardScale::kBatch) {
    ZF_ASSIGN_OR_RETURN(const MeanAndStd step, StepMeanAndStd(total, state_->comm));
    batch_std = step.std;
  }
  if (total.empty()) return absl::OkStatus();
  ZF_ASSIGN_OR_RETURN(const torch::Tensor adv, GroupAdvantages(torch::tensor(total, torch::kFloat64),
                                                               options_.grpo.rollout.samples_per_prompt,
                                                               options_.grpo.objective, batch_std));
  const torch::Tensor host = adv.to(torch::kCPU, torch::kFloat64).contiguous();
  ro.advantages.assign(host.data_ptr<double>(), host.data_ptr<double>() + host.numel());
  return absl::OkStatus();
}

std::vector<double> GrpoSession::RlooRewards(const Rollout& ro) const {
  std::vector<double> rewards = ro.scored.sum.total;
  if (const auto& clip = options_.grpo.objective.reward_clip_range) {
    for (double& r : rewards) r = std::clamp(r, clip->first, clip->second);
  }
  return rewards;
}

absl::Status GrpoSession::SetRlooAdvantages(Rollout& ro, const std::vector<double>& rewards) {
  const GrpoOptions& o = options_.grpo.objective;
  std::vector<double> a(rewards.size(), 0.0);
  if (!rewards.empty()) {
    ZF_ASSIGN_OR_RETURN(const torch::Tensor loo,
                        LeaveOneOutAdvantages(torch::tensor(rewards, torch::kFloat64),
                                              options_.grpo.rollout.samples_per_prompt));
    a.assign(loo.data_ptr<double>(), loo.data_ptr<double>() + loo.numel());
  }
  if (o.normalize_advantages) {
    ZF_ASSIGN_OR_RETURN(const MeanAndStd step, StepMeanAndStd(a, state_->comm));
    for (double& x : a) x = (x - step.mean) / (step.std + o.std_eps);
  }
  ro.advantages = std::move(a);
  return absl::OkStatus();
}

absl::Status GrpoSession::PenalizeRewardsWithKl(Rollout& ro, std::vector<GrpoRows>& rows) {
  const std::vector<double> scored = RlooRewards(ro);
  std::vector<double> rewards;
  for (GrpoRows& r : rows) {
    if (r.count == 0) continue;
    const size_t at = rewards.size();
    const std::vector<double> mine(scored.begin() + at, scored.begin() + at + r.count);
    const torch::Tensor penalised =
        KlPenalizedRewards(torch::tensor(mine, torch::kFloat64).to(r.old_logp.device()),
                           options_.grpo.objective.beta, r.old_logp, r.ref_logp, r.mask)
            .to(torch::kCPU, torch::kFloat64)
            .contiguous();
    rewards.insert(rewards.end(), penalised.data_ptr<double>(), penalised.data_ptr<double>() + r.count);
  }
  ZF_RETURN_IF_ERROR(SetRlooAdvantages(ro, rewards));
  size_t at = 0;
  for (GrpoRows& r : rows) {
    if (r.count == 0) continue;
    const std::vector<double> slice(ro.advantages.begin() + at, ro.advantages.begin() + at + r.count);
    r.advantages = torch::tensor(slice, torch::kFloat64).to(r.advantages.options());
    at += static_cast<size_t>(r.count);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<GrpoRows>> GrpoSession::TrainingRows(const Rollout& ro,
                                                                size_t gradient_accumulation) {
  State& st = *state_;
  GrpoRowFormat format;
  format.pad = st.pad;
  format.mask_truncated = options_.grpo.mask_truncated_completions;
  if (options_.grpo.top_entropy_quantile < 1.0) {
    ZF_ASSIGN_OR_RETURN(format.entropy_threshold,
                        StepEntropyThreshold(ScoredEntropies(ro.completions, format.mask_truncated),
                                             options_.grpo.top_entropy_quantile, st.comm));
  }
  // The rank's sequences in contiguous slices: the plan's micro-batches count sequences, so a micro-batch may
  // hold part of a group (the advantages are already computed).
  const size_t n = ro.completions.size();
  // Every log-prob of the loss is of the distribution the rollout sampled from, as TRL's (logits / T).
  const double temperature = options_.grpo.rollout.temperature;
  std::vector<GrpoRows> rows(gradient_accumulation);
  for (size_t k = 0; k < gradient_accumulation; ++k) {
    const size_t b = n * k / gradient_accumulation, e = n * (k + 1) / gradient_accumulation;
    if (b == e) continue;
    rows[k] = MakeGrpoRows(ro.prompts, ro.completions, ro.advantages, b, e, format, st.backend.torch_device);
    torch::NoGradGuard no_grad;
    // RLOO's KL penalty reads the old log-probs even with one iteration.
    if (options_.grpo.iterations > 1 || KlInReward())
      rows[k].old_logp = st.policy->TokenLogProbs(rows[k].tokens, rows[k].from, nullptr, temperature);
    if (options_.grpo.objective.beta > 0) {
      std::optional<AdaptersOff> base;
      if (options_.reference == ReferenceStrategy::kLoraBase) base.emplace(*st.reference);
      rows[k].ref_logp = st.reference->TokenLogProbs(rows[k].tokens, rows[k].from, nullptr, temperature);
    }
  }
  return rows;
}

absl::Status GrpoSession::MicroStep(const GrpoRows& rows, bool last, torch::Tensor* sums,
                                    int64_t report_step) {
  State& st = *state_;
  if (rows.count == 0) {  // nothing for this rank here: it takes part in the collectives with zero gradients
    return st.binding->Backward(
        torch::zeros({}, torch::TensorOptions().device(st.backend.torch_device).requires_grad(true)), last,
        0);
  }
  GrpoOptions objective = options_.grpo.objective;
  objective.max_new_tokens = options_.grpo.rollout.max_new_tokens;
  torch::Tensor logp;
  {
    sharding::ScopedStage forward(st.binding->optimizer().profile(), sharding::Stage::kForward);
    logp = st.policy->TokenLogProbs(rows.tokens, rows.from, nullptr, options_.grpo.rollout.temperature);
  }
  const torch::Tensor old = rows.old_logp.defined() ? rows.old_logp : logp.detach();
  ZF_ASSIGN_OR_RETURN(const GrpoLoss loss, GrpoPolicyLoss(logp, old, rows.ref_logp, rows.mask,
                                                          rows.advantages, objective, rows.policy_mask));
  // The forward's saved tensors are all live here: the training pass's activations, by site.
  if (report_step >= 0)
    ZF_RETURN_IF_ERROR(
        ReportAllocations(st.allocations.get(), report_step, "first micro-batch before backward"));
  ZF_RETURN_IF_ERROR(st.binding->Backward(loss.loss_sum, last, loss.units));
  torch::NoGradGuard no_grad;
  *sums += torch::stack({loss.loss_sum.detach().to(torch::kFloat64),
                         torch::full({}, loss.units, sums->options()), loss.kl_sum.to(torch::kFloat64),
                         loss.clipped_tokens.to(torch::kFloat64), loss.tokens.to(torch::kFloat64)});
  return absl::OkStatus();
}

absl::Status GrpoSession::Optimize(int64_t step, const MicroBatches& micro, Rollout& ro) {
  const auto t0 = std::chrono::steady_clock::now();
  ZF_ASSIGN_OR_RETURN(std::vector<GrpoRows> rows, TrainingRows(ro, micro.size()));
  if (KlInReward()) ZF_RETURN_IF_ERROR(PenalizeRewardsWithKl(ro, rows));
  const core::LrScheduleOptions schedule = EffectiveSchedule(options_);
  const int iterations = options_.grpo.iterations;
  for (int it = 0; it < iterations; ++it) {
    ro.sums =
        torch::zeros({5}, torch::TensorOptions().dtype(torch::kFloat64).device(state_->backend.torch_device));
    for (size_t k = 0; k < rows.size(); ++k)
      ZF_RETURN_IF_ERROR(MicroStep(rows[k], k + 1 == rows.size(), &ro.sums, it == 0 && k == 0 ? step : -1));
    // With truncated completions masked out, a step may have no token to normalise by: at least 1, as TRL's
    // token-mean losses clamp their count (bnpo's completion_mask.sum().clamp(min=1)).
    const double min_units = options_.grpo.mask_truncated_completions ? 1.0 : 0.0;
    ZF_ASSIGN_OR_RETURN(
        ro.last, state_->binding->Step(core::LearningRateAt(schedule, step * iterations + it), min_units));
  }
  ro.training_ms = MsSince(t0);
  return absl::OkStatus();
}

namespace {

// The sums every rank contributes to a step's metrics (one all-reduce), then per reward source its sum and
// sum of squares.
enum SumField {
  kCompletions,
  kReward,
  kRewardSq,
  kCorrect,
  kTokens,
  kHitMax,
  kEntropy,
  kLoss,  // the last iteration's loss sum, units, KL sum, clipped tokens and tokens (Rollout::sums)
  kUnits,
  kKl,
  kClippedTok,
  kLossTok,
  kPrompts,
  kZeroStdGroups,
  kSumFields
};

double StdDev(double sum, double sum_sq, double count) {
  return std::sqrt(std::max(sum_sq / count - (sum / count) * (sum / count), 0.0));
}

}  // namespace

std::vector<double> GrpoSession::LocalSums(const Rollout& ro) const {
  const size_t sources = options_.grpo.rewards.size();
  std::vector<double> sum(kSumFields + 2 * sources, 0.0);
  const std::vector<double>& total = ro.scored.sum.total;
  for (size_t i = 0; i < ro.completions.size(); ++i) {
    sum[kCompletions] += 1;
    sum[kReward] += total[i];
    sum[kRewardSq] += total[i] * total[i];
    sum[kCorrect] += ro.scored.correct.empty() ? 0 : ro.scored.correct[i];
    sum[kTokens] += static_cast<double>(ro.completions[i].tokens.size());
    sum[kHitMax] += ro.completions[i].hit_max_new_tokens ? 1 : 0;
  }
  sum[kEntropy] = ro.stats.entropy_sum;
  sum[kPrompts] = static_cast<double>(ro.completions.size()) / options_.grpo.rollout.samples_per_prompt;
  sum[kZeroStdGroups] = static_cast<double>(ro.zero_std_groups);
  if (ro.sums.defined()) {
    const torch::Tensor s = ro.sums.to(torch::kCPU).contiguous();
    for (int j = 0; j < 5; ++j) sum[kLoss + j] = s.data_ptr<double>()[j];
  }
  const double n = static_cast<double>(ro.completions.size());
  for (size_t s = 0; s < sources && n > 0; ++s) {
    const rewards::SourceStats& src = ro.scored.sum.sources[s];
    sum[kSumFields + 2 * s] = src.mean * n;
    sum[kSumFields + 2 * s + 1] = (src.stddev * src.stddev + src.mean * src.mean) * n;
  }
  return sum;
}

// The step's values from the global sums and maxima (longest completion, slowest rank's generation).
void GrpoSession::SetRolloutValues(const std::vector<double>& sum, double max_length,
                                   double max_generation_ms, metrics::StepMetrics* m) const {
  const double n = std::max(sum[kCompletions], 1.0);
  m->Set(names::kGrpoReward, sum[kReward] / n);
  m->Set(names::kGrpoRewardStd, StdDev(sum[kReward], sum[kRewardSq], n));
  for (size_t s = 0; s < options_.grpo.rewards.size(); ++s) {
    const std::string base = std::string(names::kGrpoRewardPrefix) + options_.grpo.rewards[s].name;
    m->Set(base, sum[kSumFields + 2 * s] / n);
    m->Set(base + "_std", StdDev(sum[kSumFields + 2 * s], sum[kSumFields + 2 * s + 1], n));
  }
  m->Set(names::kGrpoZeroStdGroups, sum[kZeroStdGroups] / std::max(sum[kPrompts], 1.0));
  const double loss_tokens = std::max(sum[kLossTok], 1.0);
  m->Set(names::kGrpoKl, sum[kKl] / loss_tokens);
  m->Set(names::kGrpoClippedFraction, sum[kClippedTok] / loss_tokens);
  m->Set(names::kGrpoEntropy, sum[kEntropy] / std::max(sum[kTokens], 1.0));
  m->Set(names::kGrpoCompletionLength, sum[kTokens] / n);
  m->Set(names::kGrpoCompletionLengthMax, max_length);
  m->Set(names::kGrpoHitMaxNewTokens, sum[kHitMax] / n);
  m->Set(names::kGrpoGenerationTokensPerS, sum[kTokens] / std::max(max_generation_ms / 1e3, 1e-9));
}

absl::StatusOr<metrics::StepMetrics> GrpoSession::StepMetricsOf(int64_t step, const Rollout& ro) {
  State& st = *state_;
  std::vector<double> sum = LocalSums(ro);
  ZF_RETURN_IF_ERROR(AllReduce(&sum, comm::ReduceOp::kSum, st.comm));
  double max_length = 0;
  for (const Completion& c : ro.completions) max_length = std::max<double>(max_length, c.tokens.size());
  std::vector<double> maxima = {max_length, ro.generation_ms};
  ZF_RETURN_IF_ERROR(AllReduce(&maxima, comm::ReduceOp::kMax, st.comm));
  metrics::StepMetrics m;
  m.step = step;
  m.rank = st.comm->rank();
  m.wall_time = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  // Column order: loss, accuracy, the optimizer's values, the rollout's, then time and memory.
  m.Set(names::kLoss, sum[kLoss] / std::max(sum[kUnits], 1e-30));
  if (st.scorer->has_answer_source())
    m.Set(names::kAccuracy, sum[kCorrect] / std::max(sum[kCompletions], 1.0));
  m.Set(names::kLearningRate, ro.last.learning_rate);
  m.Set(names::kGradNorm, ro.last.grad_norm);
  m.Set(names::kClipped, ro.last.clip_coef < 1.0f ? 1.0 : 0.0);
  m.Set(names::kClipCoef, ro.last.clip_coef);
  m.Set(names::kLossScale, ro.last.loss_scale);
  m.Set(names::kSkipped, ro.last.applied ? 0.0 : 1.0);
  SetRolloutValues(sum, maxima[0], maxima[1], &m);
  const double step_ms = ro.generation_ms + ro.training_ms;
  m.Set(names::kSamplesPerS, sum[kPrompts] / std::max(step_ms / 1e3, 1e-9));
  m.Set(names::kStepMs, step_ms);
  m.Set(names::kGenerationMs, ro.generation_ms);
  m.Set(names::kTrainingMs, ro.training_ms);
  m.Set(names::kGrpoKvCacheBytes, static_cast<double>(ro.stats.peak_cache_bytes));
  SetDeviceTimes(ro.last.breakdown, &m);
  if (const int64_t rss = HostPeakRssBytes(); rss >= 0)
    m.Set(names::kHostPeakRssBytes, static_cast<double>(rss));
  // Each pass's device peak (ResetPeakMemory between them), and the step's, the larger.
  const PeakMemory& generation = ro.generation_peak;
  const PeakMemory training = ReadPeakMemory(st.backend);
  if (training.device_reserved > 0) {
    m.Set(names::kDevicePeakAllocatedBytes,
          static_cast<double>(std::max(generation.device_allocated, training.device_allocated)));
    m.Set(names::kDevicePeakReservedBytes,
          static_cast<double>(std::max(generation.device_reserved, training.device_reserved)));
    m.Set(names::kGrpoGenerationPeakBytes, static_cast<double>(generation.device_allocated));
    m.Set(names::kGrpoTrainingPeakBytes, static_cast<double>(training.device_allocated));
  }
  return m;
}

absl::StatusOr<metrics::StepMetrics> GrpoSession::Step(int64_t step, const MicroBatches& micro) {
  State& st = *state_;
  if (micro.empty()) return absl::InvalidArgumentError("Step: no micro-batches");
  try {
    CudaAllocationReport* report = st.allocations.get();
    ResetPeaks(st.backend, report);
    ZF_RETURN_IF_ERROR(st.binding->optimizer().Flush());  // generate with the parameters ZeRO-2 just updated
    ZF_RETURN_IF_ERROR(ReportAllocations(report, step, "generation start"));
    ZF_ASSIGN_OR_RETURN(Rollout ro, RunRollout(step, micro));
    ZF_RETURN_IF_ERROR(SetAdvantages(ro));
    ro.generation_peak = ReadPeakMemory(st.backend);
    ZF_RETURN_IF_ERROR(ReportAllocations(report, step, "generation end"));
    if (report != nullptr) ZF_RETURN_IF_ERROR(report->WritePeak(step, "generation"));
    ResetPeaks(st.backend, report);
    ZF_RETURN_IF_ERROR(Optimize(step, micro, ro));
    ZF_RETURN_IF_ERROR(ReportAllocations(report, step, "training end"));
    if (report != nullptr) ZF_RETURN_IF_ERROR(report->WritePeak(step, "training"));
    return StepMetricsOf(step, ro);
  } catch (const std::exception& e) {
    return StepFailure(step, e);
  }
}

absl::StatusOr<std::vector<metrics::NamedValue>> GrpoSession::Evaluate() {
  State& st = *state_;
  ZF_RETURN_IF_ERROR(st.binding->optimizer().Flush());
  std::vector<const data::Prompt*> mine;
  std::vector<std::vector<int64_t>> inputs;
  for (size_t i = st.comm->rank(); i < st.test.prompts.size(); i += st.comm->world_size()) {
    mine.push_back(&st.test.prompts[i]);
    inputs.push_back(Widen(st.test.prompts[i].ids));
  }
  std::vector<double> sum = {static_cast<double>(mine.size()), 0, 0, 0};  // prompts, correct, reward, tokens
  if (!mine.empty()) {
    GenerationOptions go;
    go.max_new_tokens = options_.grpo.rollout.max_new_tokens;
    go.temperature = 0;
    go.eos_ids = st.eos_ids;
    go.pad_id = st.pad;
    go.max_batch = std::max<int64_t>(runtime_.eval_batch, 1);
    go.decode = options_.grpo.rollout.decode;
    absl::StatusOr<GenerationResult> gen;
    try {
      gen = Generate(*st.policy, inputs, go, &st.cache);
      st.cache.Release();
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("evaluation failed: ", e.what()));
    }
    ZF_RETURN_IF_ERROR(gen.status());
    ZF_ASSIGN_OR_RETURN(const ScoredRollout scored, st.scorer->Score(mine, gen->completions));
    for (size_t i = 0; i < mine.size(); ++i) {
      sum[1] += scored.correct.empty() ? 0 : scored.correct[i];
      sum[2] += scored.sum.total[i];
      sum[3] += static_cast<double>(gen->completions[i].tokens.size());
    }
  }
  ZF_RETURN_IF_ERROR(AllReduce(&sum, comm::ReduceOp::kSum, st.comm));
  const double n = std::max(sum[0], 1.0);
  const std::string eval = names::kEvalPrefix;
  std::vector<metrics::NamedValue> out;
  if (st.scorer->has_answer_source()) out.push_back({eval + names::kAccuracy, sum[1] / n});
  out.push_back({eval + names::kGrpoReward, sum[2] / n});
  out.push_back({eval + names::kGrpoCompletionLength, sum[3] / n});
  out.push_back({eval + names::kEvalPrompts, sum[0]});
  return out;
}

absl::Status GrpoSession::SaveCheckpoint(const std::string& root, const std::string& extra, int keep) {
  return SaveSessionCheckpoint(*state_->binding, root, extra, keep);
}

absl::StatusOr<int64_t> GrpoSession::LoadCheckpoint(const std::string& root) {
  ZF_ASSIGN_OR_RETURN(const sharding::CheckpointInfo info,
                      sharding::LoadCheckpoint(state_->binding->optimizer(), root));
  const int iterations = options_.grpo.iterations;
  if (info.step % iterations != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(root, ": the checkpoint holds ", info.step,
                     " optimizer updates, not a whole number of GRPO steps of ", iterations,
                     " iterations (was grpo.iterations changed?)"));
  }
  return info.step / iterations;  // rollout steps
}

absl::Status GrpoSession::Export(const std::string& dir) {
  return ExportPolicy(state_->comm->rank(), *state_->binding, state_->policy, state_->config, options_, dir);
}

absl::StatusOr<GrpoReport> TrainGrpo(const PreferenceTrainOptions& o, const RuntimeOptions& runtime,
                                     comm::Communicator* comm, const GrpoHooks& hooks) {
  ZF_ASSIGN_OR_RETURN(std::unique_ptr<GrpoSession> session, GrpoSession::Create(o, runtime, comm));
  GrpoReport report;
  ZF_ASSIGN_OR_RETURN(report.before, session->Evaluate());
  if (hooks.on_start) ZF_RETURN_IF_ERROR(hooks.on_start(*session, report.before));
  ZF_ASSIGN_OR_RETURN(const jobspec::StepScheduler scheduler,
                      LocalScheduler(o, comm->world_size(), session->TrainLengths()));
  report.after = report.before;
  for (int64_t step = 0; step < o.steps; ++step) {
    ZF_ASSIGN_OR_RETURN(metrics::StepMetrics m,
                        session->Step(step, scheduler.Assign(step).ranks[comm->rank()]));
    if (EvalDue(o, step)) {
      ZF_ASSIGN_OR_RETURN(report.after, session->Evaluate());
      for (const metrics::NamedValue& v : report.after) m.Set(v.name, v.value);
    }
    if (hooks.on_step) ZF_RETURN_IF_ERROR(hooks.on_step(m));
  }
  if (!o.export_dir.empty()) ZF_RETURN_IF_ERROR(session->Export(o.export_dir));
  return report;
}

}  // namespace zerofit::worker
