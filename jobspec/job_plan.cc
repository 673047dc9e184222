#include "jobspec/job_plan.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "nlohmann/json.hpp"

namespace zerofit::jobspec {
namespace {

using Json = nlohmann::ordered_json;

// Reads the fields of one JSON object, each exactly once, and says which key is wrong.
class ObjectReader {
 public:
  ObjectReader(const Json& object, std::string path, const std::string& source)
      : object_(object), path_(std::move(path)), source_(source) {}

  template <typename T>
  absl::Status Get(const char* key, T* out) {
    seen_.insert(key);
    auto it = object_.find(key);
    if (it == object_.end()) return Error(key, "missing");
    try {
      *out = it->get<T>();
    } catch (const Json::exception&) {
      return Error(key, absl::StrCat("has the wrong type (", it->type_name(), ")"));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<ObjectReader> Object(const char* key) {
    seen_.insert(key);
    auto it = object_.find(key);
    if (it == object_.end() || !it->is_object()) return Error(key, "missing or not an object");
    return ObjectReader(*it, absl::StrCat(path_, key, "."), source_);
  }
  // After every Get: a key nobody asked for is an error (a newer writer's field would be ignored otherwise).
  absl::Status NoOthers() const {
    for (auto it = object_.begin(); it != object_.end(); ++it) {
      if (!seen_.count(it.key())) return Error(it.key(), "unknown key");
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Error(const std::string& key, const std::string& why) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": job plan key '", path_, key, "' ", why));
  }
  const Json& object_;
  std::string path_;
  const std::string& source_;
  std::set<std::string> seen_;
};

Json DataJson(const DataSpec& d) {
  return {{"dir", d.dir},
          {"train", d.train},
          {"test", d.test},
          {"tokenizer", d.tokenizer},
          {"max_prompt_length", d.max_prompt_length},
          {"add_bos", d.add_bos},
          {"eos_token", d.eos_token},
          {"chat_template", d.chat_template}};
}

absl::Status ReadData(ObjectReader r, DataSpec* d) {
  for (auto [key, out] : {std::pair{"dir", &d->dir},
                          {"train", &d->train},
                          {"test", &d->test},
                          {"tokenizer", &d->tokenizer},
                          {"add_bos", &d->add_bos},
                          {"eos_token", &d->eos_token},
                          {"chat_template", &d->chat_template}}) {
    if (absl::Status s = r.Get(key, out); !s.ok()) return s;
  }
  if (absl::Status s = r.Get("max_prompt_length", &d->max_prompt_length); !s.ok()) return s;
  return r.NoOthers();
}

Json GrpoJson(const GrpoJobSpec& g) {
  Json rewards = Json::array();
  for (const RewardSpec& r : g.rewards) {
    rewards.push_back({{"type", r.type},
                       {"name", r.name},
                       {"weight", r.weight},
                       {"rule", r.rule},
                       {"pattern", r.pattern},
                       {"group", r.group},
                       {"correct", r.correct},
                       {"wrong", r.wrong},
                       {"path", r.path}});
  }
  const GrpoObjectiveSpec& o = g.grpo;
  return {{"rollout",
           {{"samples_per_prompt", g.rollout.samples_per_prompt},
            {"max_new_tokens", g.rollout.max_new_tokens},
            {"temperature", g.rollout.temperature},
            {"top_p", g.rollout.top_p},
            {"top_k", g.rollout.top_k},
            {"min_p", g.rollout.min_p},
            {"batch", g.rollout.batch},
            {"decode", g.rollout.decode}}},
          {"objective",
           {{"iterations", o.iterations},
            {"beta", o.beta},
            {"epsilon", o.epsilon},
            {"epsilon_high", o.epsilon_high.value_or(o.epsilon)},
            {"loss_type", o.loss_type},
            {"scale_rewards", o.scale_rewards},
            {"importance_sampling_level", o.importance_sampling_level},
            {"delta", o.delta.value_or(0.0)},  // 0: none (a delta is > 1)
            {"mask_truncated_completions", o.mask_truncated_completions},
            {"top_entropy_quantile", o.top_entropy_quantile},
            {"sapo_temperature_pos", o.sapo_temperature_pos},
            {"sapo_temperature_neg", o.sapo_temperature_neg},
            {"use_bias_correction_kl", o.use_bias_correction_kl},
            {"normalize_advantages", o.normalize_advantages},
            // [min, max], or [] for none
            {"reward_clip_range", o.reward_clip_range ? std::vector<double>{o.reward_clip_range->first,
                                                                            o.reward_clip_range->second}
                                                      : std::vector<double>{}}}},
          {"rewards", rewards}};
}

absl::Status ReadReward(ObjectReader r, RewardSpec* x) {
  absl::Status s;
  auto get = [&](const char* key, auto* out) {
    if (s.ok()) s = r.Get(key, out);
  };
  get("type", &x->type);
  get("name", &x->name);
  get("weight", &x->weight);
  get("rule", &x->rule);
  get("pattern", &x->pattern);
  get("group", &x->group);
  get("correct", &x->correct);
  get("wrong", &x->wrong);
  get("path", &x->path);
  return s.ok() ? r.NoOthers() : s;
}

absl::Status ReadGrpo(ObjectReader r, const std::string& source, GrpoJobSpec* g) {
  absl::StatusOr<ObjectReader> ro = r.Object("rollout");
  if (!ro.ok()) return ro.status();
  absl::Status s;
  auto get = [&](ObjectReader& from, const char* key, auto* out) {
    if (s.ok()) s = from.Get(key, out);
  };
  get(*ro, "samples_per_prompt", &g->rollout.samples_per_prompt);
  get(*ro, "max_new_tokens", &g->rollout.max_new_tokens);
  get(*ro, "temperature", &g->rollout.temperature);
  get(*ro, "top_p", &g->rollout.top_p);
  get(*ro, "top_k", &g->rollout.top_k);
  get(*ro, "min_p", &g->rollout.min_p);
  get(*ro, "batch", &g->rollout.batch);
  get(*ro, "decode", &g->rollout.decode);
  if (s.ok()) s = ro->NoOthers();
  absl::StatusOr<ObjectReader> ob = r.Object("objective");
  if (!ob.ok()) return ob.status();
  double epsilon_high = 0, delta = 0;
  get(*ob, "iterations", &g->grpo.iterations);
  get(*ob, "beta", &g->grpo.beta);
  get(*ob, "epsilon", &g->grpo.epsilon);
  get(*ob, "epsilon_high", &epsilon_high);
  get(*ob, "loss_type", &g->grpo.loss_type);
  get(*ob, "scale_rewards", &g->grpo.scale_rewards);
  get(*ob, "importance_sampling_level", &g->grpo.importance_sampling_level);
  get(*ob, "delta", &delta);
  get(*ob, "mask_truncated_completions", &g->grpo.mask_truncated_completions);
  get(*ob, "top_entropy_quantile", &g->grpo.top_entropy_quantile);
  get(*ob, "sapo_temperature_pos", &g->grpo.sapo_temperature_pos);
  get(*ob, "sapo_temperature_neg", &g->grpo.sapo_temperature_neg);
  get(*ob, "use_bias_correction_kl", &g->grpo.use_bias_correction_kl);
  get(*ob, "normalize_advantages", &g->grpo.normalize_advantages);
  std::vector<double> clip;
  get(*ob, "reward_clip_range", &clip);
  if (s.ok() && clip.size() == 2) g->grpo.reward_clip_range = std::pair<double, double>(clip[0], clip[1]);
  if (s.ok() && !clip.empty() && clip.size() != 2) {
    s = absl::InvalidArgumentError(absl::StrCat(source,
                                                ": job plan key 'grpo.objective.reward_clip_range' holds ",
                                                clip.size(), " numbers: expected [min, max] or []"));
  }
  if (s.ok()) s = ob->NoOthers();
  g->grpo.epsilon_high = epsilon_high;
  if (delta > 0) g->grpo.delta = delta;
  Json rewards;
  get(r, "rewards", &rewards);
  for (size_t i = 0; s.ok() && i < rewards.size(); ++i) {
    g->rewards.emplace_back();
    s = ReadReward(ObjectReader(rewards[i], absl::StrCat("grpo.rewards[", i, "]."), source),
                   &g->rewards.back());
  }
  return s.ok() ? r.NoOthers() : s;
}

absl::Status ReadSchedule(ObjectReader r, core::LrScheduleOptions* s) {
  std::string decay;
  if (absl::Status st = r.Get("decay", &decay); !st.ok()) return st;
  auto parsed = core::ParseLrDecay(decay);
  if (!parsed.ok()) return parsed.status();
  s->decay = *parsed;
  if (absl::Status st = r.Get("peak_lr", &s->peak_lr); !st.ok()) return st;
  if (absl::Status st = r.Get("warmup_steps", &s->warmup_steps); !st.ok()) return st;
  if (absl::Status st = r.Get("total_steps", &s->total_steps); !st.ok()) return st;
  if (absl::Status st = r.Get("min_lr", &s->min_lr); !st.ok()) return st;
  return r.NoOthers();
}

// The scalar fields of the top level, in the order they are written.
absl::Status ReadScalars(ObjectReader& r, JobPlan* p) {
  absl::Status s;
  auto get = [&](const char* key, auto* out) {
    if (s.ok()) s = r.Get(key, out);
  };
  get("name", &p->name);
  get("task", &p->task);
  get("model", &p->model);
  get("init", &p->init);
  get("device", &p->device);
  get("world_size", &p->world_size);
  get("world_sizes", &p->world_sizes);
  get("steps", &p->steps);
  get("global_batch", &p->global_batch);
  get("gradient_accumulation", &p->gradient_accumulation);
  get("activation_checkpointing", &p->activation_checkpointing);
  get("sizing", &p->sizing);
  get("weight_decay", &p->weight_decay);
  get("max_grad_norm", &p->max_grad_norm);
  get("zero_stage", &p->zero_stage);
  get("offload", &p->offload);
  get("delayed_update_from", &p->delayed_update_from);
  std::string optim;
  get("optim", &optim);
  if (s.ok()) {
    auto kind = ParseOptimizerName(optim);
    if (kind.ok()) {
      p->optimizer.kind = *kind;
    } else {
      s = kind.status();
    }
  }
  get("min_8bit_size", &p->optimizer.min_8bit_size);
  get("bf16", &p->bf16);
  get("max_length", &p->max_length);
  get("seed", &p->seed);
  get("reference", &p->reference);
  get("export", &p->export_dir);
  return s;
}

absl::Status ReadSections(ObjectReader& r, JobPlan* p) {
  auto section = [&](const char* key, auto read) -> absl::Status {
    auto sub = r.Object(key);
    if (!sub.ok()) return sub.status();
    return read(std::move(*sub));
  };
  absl::Status s = section("data", [&](ObjectReader x) { return ReadData(std::move(x), &p->data); });
  if (s.ok()) {
    s = section("eval", [&](ObjectReader x) -> absl::Status {
      absl::Status e = x.Get("every", &p->eval.every);
      if (e.ok()) e = x.Get("data", &p->eval.data);
      if (e.ok()) e = x.Get("max_samples", &p->eval.max_samples);
      return e.ok() ? x.NoOthers() : e;
    });
  }
  if (s.ok())
    s = section("schedule", [&](ObjectReader x) { return ReadSchedule(std::move(x), &p->schedule); });
  if (s.ok()) {
    s = section("checkpoint", [&](ObjectReader x) -> absl::Status {
      absl::Status e = x.Get("dir", &p->checkpoint.dir);
      if (e.ok()) e = x.Get("every", &p->checkpoint.every);
      if (e.ok()) e = x.Get("keep", &p->checkpoint.keep);
      if (e.ok()) e = x.Get("overwrite", &p->checkpoint.overwrite);
      if (e.ok()) e = x.Get("resume", &p->checkpoint.resume);
      return e.ok() ? x.NoOthers() : e;
    });
  }
  if (s.ok()) {
    s = section("lora", [&](ObjectReader x) -> absl::Status {
      absl::Status e = x.Get("rank", &p->lora.rank);
      if (e.ok()) e = x.Get("alpha", &p->lora.alpha);
      if (e.ok()) e = x.Get("dropout", &p->lora.dropout);
      if (e.ok()) e = x.Get("target_modules", &p->lora.target_modules);
      return e.ok() ? x.NoOthers() : e;
    });
  }
  if (s.ok()) {
    s = section("metrics", [&](ObjectReader x) -> absl::Status {
      absl::Status e = x.Get("tensorboard", &p->metrics.tensorboard);
      if (e.ok()) e = x.Get("jsonl", &p->metrics.jsonl);
      return e.ok() ? x.NoOthers() : e;
    });
  }
  if (s.ok()) {
    s = section("planned_peak", [&](ObjectReader x) -> absl::Status {
      absl::Status e = x.Get("device_bytes", &p->planned_peak.device_bytes);
      if (e.ok()) e = x.Get("host_bytes", &p->planned_peak.host_bytes);
      if (e.ok()) e = x.Get("basis", &p->planned_peak.basis);
      return e.ok() ? x.NoOthers() : e;
    });
  }
  return s;
}

// The plan's task's own section: "grpo", "dpo", "reward" or "sft" (JobPlanToJson writes the one of the
// plan's task, and only that one).
absl::Status ReadTaskSection(ObjectReader& r, const std::string& source, JobPlan* p) {
  if (p->task == "grpo") {
    absl::StatusOr<ObjectReader> g = r.Object("grpo");
    return g.ok() ? ReadGrpo(std::move(*g), source, &p->grpo) : g.status();
  }
  auto section = [&](const char* key, auto read) -> absl::Status {
    absl::StatusOr<ObjectReader> sub = r.Object(key);
    if (!sub.ok()) return sub.status();
    absl::Status e = read(*sub);
    return e.ok() ? sub->NoOthers() : e;
  };
  if (p->task == "dpo") {
    return section("dpo", [&](ObjectReader& x) {
      absl::Status e = x.Get("beta", &p->dpo.beta);
      if (e.ok()) e = x.Get("loss_type", &p->dpo.loss_type);
      if (e.ok()) e = x.Get("simpo_gamma", &p->dpo.simpo_gamma);
      if (e.ok()) e = x.Get("discopop_tau", &p->dpo.discopop_tau);
      if (e.ok()) e = x.Get("ld_alpha", &p->dpo.ld_alpha);
      if (e.ok()) e = x.Get("rpo_alpha", &p->dpo.rpo_alpha);
      if (e.ok()) e = x.Get("reference_free", &p->dpo.reference_free);
      return e.ok() ? x.Get("label_smoothing", &p->dpo.label_smoothing) : e;
    });
  }
  if (p->task == "reward") {
    return section("reward", [&](ObjectReader& x) {
      return x.Get("center_rewards_coefficient", &p->reward.center_rewards_coefficient);
    });
  }
  if (p->task == "sft") {
    return section("sft", [&](ObjectReader& x) {
      ZF_RETURN_IF_ERROR(x.Get("completion_only_loss", &p->sft.completion_only_loss));
      return x.Get("assistant_only_loss", &p->sft.assistant_only_loss);
    });
  }
  return absl::OkStatus();
}

}  // namespace

// Declared in job_spec.h; defined here so that readers of plans need not link the YAML parser.
core::LrScheduleOptions LrScheduleOf(const TrainingSpec& t) {
  core::LrScheduleOptions s;
  s.decay = t.lr_schedule;
  s.peak_lr = static_cast<float>(t.lr);
  s.warmup_steps = t.warmup_steps;
  s.total_steps = t.decay_steps > 0 ? t.decay_steps : t.steps;
  s.min_lr = static_cast<float>(t.min_lr);
  return s;
}

// Declared in job_spec.h, defined here for the same reason.
const char* NodeLossName(NodeLoss n) { return n == NodeLoss::kShrink ? "shrink" : "wait"; }

std::vector<int> AllowedWorldSizes(const JobSpec& spec) {
  if (!spec.slurm || spec.slurm->on_node_loss != NodeLoss::kShrink) return {spec.world_size};
  std::vector<int> sizes;
  for (int n = spec.slurm->fewest_nodes(); n <= spec.slurm->nodes; ++n) {
    sizes.push_back(n * spec.slurm->ranks_per_node());
  }
  return sizes;
}

std::string JobPlanToJson(const JobPlan& p) {
  Json j = {{"version", p.version},
            {"name", p.name},
            {"task", p.task},
            {"model", p.model},
            {"init", p.init},
            {"device", p.device},
            {"world_size", p.world_size},
            {"world_sizes", p.world_sizes},
            {"data", DataJson(p.data)},
            {"eval", {{"every", p.eval.every}, {"data", p.eval.data}, {"max_samples", p.eval.max_samples}}},
            {"steps", p.steps},
            {"global_batch", p.global_batch},
            {"gradient_accumulation", p.gradient_accumulation},
            {"activation_checkpointing", p.activation_checkpointing},
            {"sizing", p.sizing},
            {"schedule",
             {{"decay", core::LrDecayName(p.schedule.decay)},
              {"peak_lr", p.schedule.peak_lr},
              {"warmup_steps", p.schedule.warmup_steps},
              {"total_steps", p.schedule.total_steps},
              {"min_lr", p.schedule.min_lr}}},
            {"weight_decay", p.weight_decay},
            {"max_grad_norm", p.max_grad_norm},
            {"zero_stage", p.zero_stage},
            {"offload", p.offload},
            {"delayed_update_from", p.delayed_update_from},
            {"optim", OptimizerName(p.optimizer.kind)},
            {"min_8bit_size", p.optimizer.min_8bit_size},
            {"bf16", p.bf16},
            {"max_length", p.max_length},
            {"seed", p.seed},
            {"reference", p.reference},
            {"lora",
             {{"rank", p.lora.rank},
              {"alpha", p.lora.alpha},
              {"dropout", p.lora.dropout},
              {"target_modules", p.lora.target_modules}}},
            {"checkpoint",
             {{"dir", p.checkpoint.dir},
              {"every", p.checkpoint.every},
              {"keep", p.checkpoint.keep},
              {"overwrite", p.checkpoint.overwrite},
              {"resume", p.checkpoint.resume}}},
            {"metrics", {{"tensorboard", p.metrics.tensorboard}, {"jsonl", p.metrics.jsonl}}},
            {"export", p.export_dir},
            {"planned_peak",
             {{"device_bytes", p.planned_peak.device_bytes},
              {"host_bytes", p.planned_peak.host_bytes},
              {"basis", p.planned_peak.basis}}}};
  if (p.task == "grpo") j["grpo"] = GrpoJson(p.grpo);
  if (p.task == "dpo") {
    j["dpo"] = {{"beta", p.dpo.beta},
                {"loss_type", p.dpo.loss_type},
                {"label_smoothing", p.dpo.label_smoothing},
                {"simpo_gamma", p.dpo.simpo_gamma},
                {"discopop_tau", p.dpo.discopop_tau},
                {"ld_alpha", p.dpo.ld_alpha},
                {"rpo_alpha", p.dpo.rpo_alpha},
                {"reference_free", p.dpo.reference_free}};
  }
  if (p.task == "reward") j["reward"] = {{"center_rewards_coefficient", p.reward.center_rewards_coefficient}};
  if (p.task == "sft") {
    j["sft"] = {{"completion_only_loss", p.sft.completion_only_loss},
                {"assistant_only_loss", p.sft.assistant_only_loss}};
  }
  return j.dump(2) + "\n";
}

absl::StatusOr<JobPlan> JobPlanFromJson(const std::string& json, const std::string& source) {
  Json j;
  try {
    j = Json::parse(json);
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": the job plan is not valid JSON: ", e.what()));
  }
  if (!j.is_object())
    return absl::InvalidArgumentError(absl::StrCat(source, ": the job plan is not an object"));
  JobPlan p;
  ObjectReader r(j, "", source);
  if (absl::Status s = r.Get("version", &p.version); !s.ok()) return s;
  if (p.version != kJobPlanVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat(source, ": job plan version ", p.version, ", this program reads version ",
                     kJobPlanVersion, ": run workers and coordinator from the same zerofit build"));
  }
  if (absl::Status s = ReadScalars(r, &p); !s.ok()) return s;
  if (absl::Status s = ReadSections(r, &p); !s.ok()) return s;
  if (absl::Status s = ReadTaskSection(r, source, &p); !s.ok()) return s;
  if (absl::Status s = r.NoOthers(); !s.ok()) return s;
  return p;
}

int64_t ItemsPerStep(const JobPlan& plan) {
  return plan.global_batch * (plan.task == "grpo" ? plan.grpo.rollout.samples_per_prompt : 1);
}

bool EvalDue(int64_t steps, int64_t every, int64_t step) {
  const int64_t done = step + 1;  // steps are 0-based
  return done == steps || (every > 0 && done % every == 0);
}

}  // namespace zerofit::jobspec
