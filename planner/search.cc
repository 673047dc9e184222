#include "planner/search.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/status_macros.h"

namespace zerofit::planner {
namespace {

constexpr double kBaseMfu = 0.45;
constexpr double kMfuHalfTokens = 512;
constexpr double kOverlappable = 0.8;  // share of backward time that can hide collectives

bool IsPairTask(Task t) { return t == Task::kReward || t == Task::kDpo; }

// Rows (sequences) of one micro-batch and their length.
int64_t Rows(const Workload& w, const Strategy& s) {
  return IsPairTask(w.task) ? 2 * s.micro_batch : s.micro_batch;
}
int64_t SeqLen(const Workload& w) { return w.task == Task::kGrpo ? w.prompt_len + w.new_tokens : w.seq_len; }

// Work items per GPU per step: pairs or sequences (GRPO: sampled sequences).
absl::StatusOr<int64_t> PerGpu(const Workload& w, int world) {
  const int64_t items = w.task == Task::kGrpo ? w.global_batch * w.samples_per_prompt : w.global_batch;
  if (w.global_batch < 1) return absl::InvalidArgumentError("--global-batch must be at least 1");
  if (w.task == Task::kGrpo && w.global_batch % world != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--global-batch ", w.global_batch,
                                                   " prompts cannot be split evenly over ", world,
                                                   " GPUs: use a multiple of ", world));
  }
  if (items % world != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--global-batch ", w.global_batch, " cannot be split evenly over ", world,
                     " GPUs: use a multiple of ", world, " (for example ", (items / world + 1) * world, ")"));
  }
  return items / world;
}

std::vector<int64_t> Divisors(int64_t n, int64_t max) {
  std::vector<int64_t> d;
  for (int64_t k = 1; k <= n && k <= max; ++k)
    if (n % k == 0) d.push_back(k);
  return d;
}

double ForwardFlopsPerToken(const ModelShape& m, int64_t seq, bool policy_head) {
  const double matmul = 2.0 * static_cast<double>(m.BackboneParameters() - m.EmbeddingParameters()) +
                        (policy_head ? 2.0 * m.vocab_size * m.hidden_size : 0.0);
  const double attention = 2.0 * 2.0 * m.num_layers * static_cast<double>(seq) * m.q_size() / 2.0;  // causal
  return matmul + attention;
}

}  // namespace

std::string FormatBytes(double bytes) { return absl::StrFormat("%.2f GB", bytes / kGB); }

TimeUnit TimeUnitFor(double reference_seconds) {
  if (reference_seconds >= 1 || reference_seconds <= 0) return TimeUnit{};
  if (reference_seconds >= 1e-3) return TimeUnit{1e3, "ms", 2};
  return TimeUnit{1e6, "us", 1};
}

std::string FormatTime(double seconds, const TimeUnit& unit) {
  return absl::StrFormat("%.*f", unit.decimals, seconds * unit.per_second);
}

std::string DescribeStrategy(const Strategy& s, Task task) {
  std::string d = absl::StrCat("micro-batch ", s.micro_batch, " x accumulation ", s.gradient_accumulation,
                               ", ZeRO-", s.zero_stage, s.offload ? " + optimizer offload" : "",
                               s.checkpointing ? ", checkpointing" : "",
                               s.lora_rank > 0 ? absl::StrCat(", LoRA r=", s.lora_rank) : ", full fine-tune");
  if (task == Task::kDpo || task == Task::kGrpo)
    absl::StrAppend(&d, ", reference ", ReferenceName(s.reference));
  if (task == Task::kGrpo) absl::StrAppend(&d, ", rollout ", s.rollout_prompts, " prompts/GPU");
  return d;
}

StepTime EstimateStepTime(const ModelShape& m, const Workload& w, const Strategy& s, const Hardware& hw,
                          int nodes) {
  StepTime t;
  const int world = hw.gpus_per_node * std::max(1, nodes);
  const int a = w.element_bytes;
  const int64_t seq = SeqLen(w);
  const double micro_tokens = static_cast<double>(Rows(w, s)) * seq;
  const double tokens = micro_tokens * s.gradient_accumulation;
  const double mfu = kBaseMfu * micro_tokens / (micro_tokens + kMfuHalfTokens);
  const double rate = hw.bf16_flops * mfu;
  const bool policy_head = w.task != Task::kReward;
  const double fwd = tokens * ForwardFlopsPerToken(m, seq, policy_head) / rate;
  const double bwd = (s.lora_rank > 0 ? 1.0 : 2.0) * fwd;
  t.compute = fwd + bwd;
  t.recompute = s.checkpointing ? fwd : 0.0;
  if (ReferenceRunsForward(s.reference)) t.reference += fwd;
  t.reference += w.extra_frozen_models * tokens * ForwardFlopsPerToken(m, seq, false) / rate;
  if (s.reference == Reference::kOffloaded) {
    t.reference +=
        s.gradient_accumulation * a * static_cast<double>(m.PolicyParameters()) / hw.host_link_bytes_per_s;
  }
  // Collectives.
  const double trainable = static_cast<double>(
      s.lora_rank > 0 ? m.LoraParameters(s.lora_rank)
                      : (w.task == Task::kReward ? m.RewardModelParameters() : m.PolicyParameters()));
  const double ring = world > 1 ? (world - 1.0) / world : 0.0;
  const double bw = nodes > 1 ? hw.inter_node_bytes_per_s : hw.intra_node_bytes_per_s;
  double per_micro = 0, per_step = 0;
  if (s.zero_stage <= 1) {
    per_step = 2.0 * a * trainable * ring;  // all-reduce once per step (gradients accumulate locally)
  } else {
    per_micro = a * trainable * ring;  // reduce-scatter every micro-batch
    per_step = a * trainable * ring;   // all-gather of the updated parameters
    if (s.zero_stage == 3) {
      per_micro += 2.0 * a * static_cast<double>(s.lora_rank > 0 ? m.PolicyParameters() : trainable) * ring;
    }
  }
  const double bwd_micro = bwd / s.gradient_accumulation;
  t.communication = s.gradient_accumulation * std::max(0.0, per_micro / bw - kOverlappable * bwd_micro) +
                    std::max(0.0, per_step / bw - (s.zero_stage <= 1 ? kOverlappable * bwd_micro : 0.0));
  if (s.offload) {
    const double shard = trainable / world;
    const double adam_rate =
        hw.cpu_adam_params_per_s * (w.eight_bit_moments ? hw.cpu_adam_8bit_relative_rate : 1.0);
    t.offload = 2.0 * a * shard / hw.host_link_bytes_per_s + shard / adam_rate;
  }
  if (w.task == Task::kGrpo) {
    const double prompts_per_gpu = static_cast<double>(w.global_batch) / world;
    const double passes = std::ceil(prompts_per_gpu / static_cast<double>(s.rollout_prompts));
    const double seqs = static_cast<double>(s.rollout_prompts * w.samples_per_prompt);
    // Each decode step reads the weights once and the KV cache of every sequence: an eager step the slots
    // written so far (half the new tokens on average), the fixed-shape step of a graph every slot of the pass
    // (the unwritten ones masked). A step also waits for its launches: an eager one for the host to dispatch
    // every operator, a replayed CUDA graph for its kernels one after another, whatever the batch.
    const double attended = w.prompt_len + (w.graphed_decode ? w.new_tokens : w.new_tokens / 2.0);
    const double kv = 2.0 * m.num_layers * m.kv_size() * a * seqs * attended;
    const double traffic = (a * static_cast<double>(m.PolicyParameters()) + kv) / hw.hbm_bytes_per_s;
    const double dispatch =
        m.num_layers * (w.graphed_decode ? hw.graphed_decode_layer_s : hw.eager_decode_layer_s);
    const double step = std::max(traffic, dispatch);
    t.generation = passes * w.new_tokens * step;
  }
  return t;
}

namespace {

// The values MakePlan searches over: each option's allowed values (one where the caller pinned it).
struct SearchSpace {
  std::vector<int> stages;
  std::vector<bool> offloads, ckpts;
  std::vector<int64_t> ranks, micro, rollouts;
  std::vector<Reference> refs;
};

absl::StatusOr<SearchSpace> MakeSearchSpace(const Workload& w, const Constraints& c, int64_t per_gpu,
                                            int world_size) {
  SearchSpace sp;
  if (c.max_stage < 0 || c.max_stage > 3) {
    return absl::InvalidArgumentError(absl::StrCat("--max-stage must be 0..3, got ", c.max_stage));
  }
  if (c.zero_stage && *c.zero_stage > c.max_stage) {
    return absl::InvalidArgumentError(
        absl::StrCat("--stage ", *c.zero_stage, " is above --max-stage ", c.max_stage,
                     ": raise --max-stage to plan it (the workers run stages 0-2)"));
  }
  for (int st = 0; st <= std::min(3, c.max_stage); ++st)
    if (!c.zero_stage || *c.zero_stage == st) sp.stages.push_back(st);
  if (c.offload == true && sp.stages == std::vector<int>{0}) {  // the search skips stage 0 with offload
    return absl::InvalidArgumentError(
        "--offload on moves ZeRO's sharded optimizer state to the host: it needs --stage 1 or higher (and "
        "--max-stage >= 1)");
  }
  for (bool b : {false, true}) {
    if (!c.offload || *c.offload == b) sp.offloads.push_back(b);
    if (!c.checkpointing || *c.checkpointing == b) sp.ckpts.push_back(b);
  }
  sp.ranks = {0};
  if (c.allow_lora) sp.ranks.insert(sp.ranks.end(), c.lora_ranks.begin(), c.lora_ranks.end());
  if (c.lora_rank) sp.ranks = {*c.lora_rank};
  sp.refs = {Reference::kNone};
  if (w.task == Task::kDpo) {
    sp.refs = {Reference::kResident, Reference::kOffloaded, Reference::kPrecomputed, Reference::kLoraBase};
  }
  if (w.task == Task::kGrpo) sp.refs = {Reference::kResident, Reference::kOffloaded, Reference::kLoraBase};
  if (c.reference && w.task != Task::kDpo && w.task != Task::kGrpo) {
    return absl::InvalidArgumentError(
        absl::StrCat("--reference applies to dpo and grpo, not ", TaskName(w.task)));
  }
  if (c.reference) sp.refs = {*c.reference};
  if (c.reference == Reference::kLoraBase && (c.lora_rank ? *c.lora_rank <= 0 : !c.allow_lora)) {
    return absl::InvalidArgumentError(
        "--reference lora-base is the policy with its LoRA adapters disabled: it needs LoRA (--lora-rank or "
        "--allow-lora)");
  }
  sp.micro = Divisors(per_gpu, c.max_micro_batch);
  if (c.micro_batch) {
    if (per_gpu % *c.micro_batch != 0) {
      return absl::InvalidArgumentError(absl::StrCat("--micro-batch ", *c.micro_batch,
                                                     " does not divide the ", per_gpu,
                                                     " items each GPU gets per step"));
    }
    sp.micro = {*c.micro_batch};
  }
  sp.rollouts = {1};
  if (w.task == Task::kGrpo) sp.rollouts = Divisors(w.global_batch / world_size, 1 << 20);
  return sp;
}

// Every combination of the search space, with its memory, step time and whether it fits the plan's caps.
std::vector<Candidate> Enumerate(const ModelShape& m, const Workload& w, const Hardware& hw,
                                 const Constraints& c, const Plan& plan, int64_t per_gpu,
                                 const SearchSpace& sp) {
  std::vector<Candidate> all;
  for (int64_t mb : sp.micro)
    for (int st : sp.stages)
      for (bool off : sp.offloads)
        for (bool ck : sp.ckpts)
          for (int64_t r : sp.ranks)
            for (Reference ref : sp.refs)
              for (int64_t ro : sp.rollouts) {
                if (off && st == 0) continue;  // offload moves the sharded optimizer state
                if (ref == Reference::kLoraBase && r == 0) continue;  // it is the LoRA policy's base
                Strategy s;
                s.micro_batch = mb;
                s.gradient_accumulation = per_gpu / mb;
                s.zero_stage = st;
                s.offload = off;
                s.checkpointing = ck;
                s.lora_rank = r;
                s.reference = ref;
                s.rollout_prompts = ro;
                s.bucket_bytes = c.bucket_bytes;
                Candidate cand;
                cand.strategy = s;
                cand.memory = EstimateMemory(m, w, s, hw, plan.world_size);
                cand.time = EstimateStepTime(m, w, s, hw, c.nodes);
                cand.fits =
                    cand.memory.device_bytes <= plan.device_cap && cand.memory.host_bytes <= plan.host_cap;
                all.push_back(std::move(cand));
              }
  return all;
}

std::string LargestItem(const MemoryEstimate& e) {
  const MemoryItem* big = &e.device.front();
  for (const MemoryItem& i : e.device)
    if (i.bytes > big->bytes) big = &i;
  return absl::StrCat(big->name, " ", FormatBytes(big->bytes));
}

// The line for an option value that was not chosen: the best candidate that has it, or why none fits.
void Explain(const std::vector<Candidate>& all, const Candidate& best, const std::string& label,
             const std::function<bool(const Strategy&)>& has, Plan* plan) {
  const Candidate* fit = nullptr;
  const Candidate* small = nullptr;
  for (const Candidate& k : all) {
    if (!has(k.strategy)) continue;
    if (!small || k.memory.device_bytes < small->memory.device_bytes) small = &k;
    if (k.fits && (!fit || k.time.total() < fit->time.total())) fit = &k;
  }
  if (!small) return;
  const Task task = plan->workload.task;
  if (!fit) {
    const MemoryEstimate& e = small->memory;
    if (e.device_bytes > plan->device_cap) {
      plan->rejected.push_back(absl::StrCat(label, ": ", FormatBytes(e.device_bytes), " > ",
                                            FormatBytes(plan->device_cap), " cap even with ",
                                            DescribeStrategy(small->strategy, task), "; ", LargestItem(e)));
    } else {
      plan->rejected.push_back(absl::StrCat(label, ": host ", FormatBytes(e.host_bytes), " per node > ",
                                            FormatBytes(plan->host_cap), " cap"));
    }
    return;
  }
  const double chosen_t = best.time.total();
  const double ratio = fit->time.total() / chosen_t;
  const TimeUnit u = TimeUnitFor(chosen_t);
  const auto time = [&u](double t) { return absl::StrCat(FormatTime(t, u), " ", u.name); };
  plan->rejected.push_back(
      absl::StrFormat("%s: fits (%s) but %.2fx the step time (%s vs %s%s)", label,
                      FormatBytes(fit->memory.device_bytes), ratio, time(fit->time.total()), time(chosen_t),
                      fit->time.offload > 0.1 * fit->time.total()
                          ? absl::StrCat(", offload ", time(fit->time.offload))
                          : (fit->time.recompute > 0 && !best.strategy.checkpointing
                                 ? absl::StrCat(", recompute ", time(fit->time.recompute))
                                 : std::string())));
}

// One line per option value that was not chosen (Explain), option by option.
void ExplainRejected(const std::vector<Candidate>& all, const Candidate& best, const SearchSpace& sp,
                     Plan* plan) {
  const Strategy& cs = best.strategy;
  auto explain = [&](const std::string& label, const std::function<bool(const Strategy&)>& has) {
    Explain(all, best, label, has, plan);
  };
  for (int64_t mb : sp.micro)
    if (mb != cs.micro_batch)
      explain(absl::StrCat("micro-batch ", mb), [mb](const Strategy& s) { return s.micro_batch == mb; });
  for (int st : sp.stages)
    if (st != cs.zero_stage)
      explain(absl::StrCat("ZeRO-", st), [st](const Strategy& s) { return s.zero_stage == st; });
  for (bool off : sp.offloads)
    if (off != cs.offload)
      explain(off ? "optimizer offload" : "no optimizer offload",
              [off](const Strategy& s) { return s.offload == off; });
  for (bool ck : sp.ckpts)
    if (ck != cs.checkpointing)
      explain(ck ? "activation checkpointing" : "no activation checkpointing",
              [ck](const Strategy& s) { return s.checkpointing == ck; });
  for (int64_t r : sp.ranks)
    if (r != cs.lora_rank)
      explain(r > 0 ? absl::StrCat("LoRA r=", r) : "full fine-tune",
              [r](const Strategy& s) { return s.lora_rank == r; });
  for (Reference ref : sp.refs)
    if (ref != cs.reference)
      explain(absl::StrCat("reference ", ReferenceName(ref)),
              [ref](const Strategy& s) { return s.reference == ref; });
  for (int64_t ro : sp.rollouts)
    if (ro != cs.rollout_prompts)
      explain(absl::StrCat("rollout ", ro, " prompts/GPU"),
              [ro](const Strategy& s) { return s.rollout_prompts == ro; });
}

// The fastest fitting candidate with 8-bit AdamW moments (on the device, or offloaded to host memory where
// offload is searched or pinned on), when the workload has fp32 moments; none otherwise.
std::optional<Candidate> BestWithEightBitMoments(const ModelShape& m, const Workload& w, const Hardware& hw,
                                                 const Constraints& c, const Plan& plan, int64_t per_gpu) {
  if (w.eight_bit_moments) return std::nullopt;
  Workload w8 = w;
  w8.eight_bit_moments = true;
  auto sp = MakeSearchSpace(w8, c, per_gpu, plan.world_size);
  if (!sp.ok()) return std::nullopt;
  std::optional<Candidate> best;
  for (Candidate& k : Enumerate(m, w8, hw, c, plan, per_gpu, *sp)) {
    if (k.fits && (!best || k.time.total() < best->time.total())) best = std::move(k);
  }
  return best;
}

// What 8-bit moments would give beside the chosen plan: a line when they avoid its offload or step at least
// 5% faster (a larger micro-batch, no recompute). An 8-bit plan that offloads as the chosen one does saves
// host memory only: no line unless it is faster.
void AddEightBitLever(const std::optional<Candidate>& q, const Candidate& chosen, Task task, Plan* plan) {
  if (!q) return;
  const double ratio = q->time.total() / chosen.time.total();
  const bool avoids_offload = chosen.strategy.offload && !q->strategy.offload;
  if (!avoids_offload && ratio > 0.95) return;
  const TimeUnit u = TimeUnitFor(chosen.time.total());
  plan->levers.push_back(absl::StrFormat(
      "8-bit AdamW moments (training.optim: adamw_8bit, --optim adamw_8bit): %s fits (%s)%s, %.2fx the step "
      "time (%s vs %s %s)",
      DescribeStrategy(q->strategy, task), FormatBytes(q->memory.device_bytes),
      avoids_offload ? " without offload" : "", ratio, FormatTime(q->time.total(), u),
      FormatTime(chosen.time.total(), u), u.name));
}

}  // namespace

absl::StatusOr<Plan> MakePlan(const ModelShape& m, const Workload& w, const Hardware& hw,
                              const Constraints& c) {
  if (c.nodes < 1) return absl::InvalidArgumentError("--nodes must be at least 1");
  if (w.seq_len < 2 && w.task != Task::kGrpo)
    return absl::InvalidArgumentError("--seq-len must be at least 2");
  if (w.task == Task::kGrpo && (w.prompt_len < 1 || w.new_tokens < 1)) {
    return absl::InvalidArgumentError("GRPO needs --prompt-len and --new-tokens >= 1");
  }
  // As the job spec's rollout.samples_per_prompt: one sample a prompt has an advantage of 0 and trains
  // nothing.
  if (w.task == Task::kGrpo && w.samples_per_prompt < 2) {
    return absl::InvalidArgumentError(
        "--samples-per-prompt must be at least 2 (GRPO's advantages are relative to the prompt's group)");
  }
  Plan plan;
  plan.model = m;
  plan.workload = w;
  plan.hardware = hw;
  plan.nodes = c.nodes;
  plan.world_size = hw.gpus_per_node * c.nodes;
  plan.device_cap = c.safety * hw.gpu_bytes;
  plan.host_cap = c.host_safety * hw.host_bytes_per_node;
  ZF_ASSIGN_OR_RETURN(const int64_t per_gpu, PerGpu(w, plan.world_size));
  ZF_ASSIGN_OR_RETURN(const SearchSpace sp, MakeSearchSpace(w, c, per_gpu, plan.world_size));
  const std::vector<Candidate> all = Enumerate(m, w, hw, c, plan, per_gpu, sp);
  if (all.empty()) return absl::InternalError("the plan search had no configuration to try");
  plan.candidates_searched = all.size();
  const Candidate* best = nullptr;
  const Candidate* smallest = nullptr;
  for (const Candidate& k : all) {
    if (!smallest || k.memory.device_bytes < smallest->memory.device_bytes) smallest = &k;
    if (!k.fits) continue;
    ++plan.candidates_fitting;
    if (!best || k.time.total() < best->time.total() ||
        (k.time.total() == best->time.total() && k.memory.device_bytes < best->memory.device_bytes)) {
      best = &k;
    }
  }
  const std::optional<Candidate> eight_bit = BestWithEightBitMoments(m, w, hw, c, plan, per_gpu);
  if (!best) {
    const MemoryEstimate& e = smallest->memory;
    std::string why =
        e.device_bytes > plan.device_cap
            ? absl::StrCat(FormatBytes(e.device_bytes), " per GPU > ", FormatBytes(plan.device_cap), " cap")
            : absl::StrCat(FormatBytes(e.host_bytes), " host per node > ", FormatBytes(plan.host_cap),
                           " cap");
    return absl::FailedPreconditionError(absl::StrCat(
        "nothing fits: the smallest configuration (", DescribeStrategy(smallest->strategy, w.task),
        ") needs ", why, "; largest item: ", LargestItem(e),
        c.allow_lora ? "" : ". Allow LoRA (--allow-lora), add nodes, or shorten ",
        w.task == Task::kGrpo ? "--prompt-len or --new-tokens" : "--seq-len",
        eight_bit
            ? absl::StrCat(". With 8-bit AdamW moments (training.optim: adamw_8bit, --optim adamw_8bit) ",
                           DescribeStrategy(eight_bit->strategy, w.task), " fits (",
                           FormatBytes(eight_bit->memory.device_bytes),
                           eight_bit->strategy.offload
                               ? absl::StrCat(" per GPU, ", FormatBytes(eight_bit->memory.host_bytes),
                                              " host per node")
                               : "",
                           ")")
            : ""));
  }
  plan.chosen = *best;
  ExplainRejected(all, *best, sp, &plan);
  AddEightBitLever(eight_bit, *best, w.task, &plan);
  return plan;
}

}  // namespace zerofit::planner
