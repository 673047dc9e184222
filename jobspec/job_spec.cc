#include "jobspec/job_spec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/checked_math.h"
#include "core/excerpt.h"
#include "core/json_depth.h"
#include "core/regular_file.h"
#include "core/status_macros.h"
#include "core/text_file.h"
#include "jobspec/grpo_spec_yaml.h"
#include "jobspec/training_validation.h"
#include "jobspec/yaml_reader.h"
#include "nlohmann/json.hpp"
#include "planner/hardware.h"

namespace zerofit::jobspec {
namespace {

using Json = nlohmann::json;

// A DeepSpeed config is a few KiB of JSON; anything near this is not one.
constexpr uint64_t kMaxDeepSpeedConfigBytes = 1 << 20;

// `data: DIR` or `data: {train, test, tokenizer, max_prompt_length, add_bos, eos_token, chat_template}`.
absl::Status ParseData(const YamlReader& r, const YAML::Node& root, DataSpec* d) {
  const YAML::Node n = root["data"];
  if (!n.IsDefined() || n.IsNull()) return absl::OkStatus();
  if (n.IsScalar()) {
    ZF_RETURN_IF_ERROR(r.Get(root, "data", "data", &d->dir, "a directory or a mapping"));
    return r.Required(n, "data", d->dir, "a directory of token-id files, or a mapping with train:");
  }
  if (!n.IsMap()) return r.Error(n, "data", "expected a directory of token-id files or a mapping");
  ZF_RETURN_IF_ERROR(r.OnlyKeys(
      n, "data.",
      {"train", "test", "tokenizer", "max_prompt_length", "add_bos", "eos_token", "chat_template"}));
  ZF_RETURN_IF_ERROR(r.Get(n, "train", "data.train", &d->train, "a path"));
  ZF_RETURN_IF_ERROR(r.Get(n, "test", "data.test", &d->test, "a path"));
  ZF_RETURN_IF_ERROR(r.Get(n, "tokenizer", "data.tokenizer", &d->tokenizer, "a directory"));
  ZF_RETURN_IF_ERROR(
      r.Get(n, "max_prompt_length", "data.max_prompt_length", &d->max_prompt_length, "an integer"));
  ZF_RETURN_IF_ERROR(r.Get(n, "add_bos", "data.add_bos", &d->add_bos, "auto, true or false"));
  ZF_RETURN_IF_ERROR(r.Get(n, "eos_token", "data.eos_token", &d->eos_token, "a token of the vocabulary"));
  ZF_RETURN_IF_ERROR(r.Get(n, "chat_template", "data.chat_template", &d->chat_template,
                           "a .jinja file or a model directory"));
  if (absl::StripAsciiWhitespace(d->train).empty()) {
    return r.Error(n["train"].IsDefined() && !n["train"].IsNull() ? n["train"] : n, "data.train",
                   "required (a JSONL file of preference pairs)");
  }
  if (d->max_prompt_length < 0) {
    return r.Error(n["max_prompt_length"], "data.max_prompt_length", "must be >= 0 (0: max_length / 2)");
  }
  if (d->add_bos != "auto" && d->add_bos != "true" && d->add_bos != "false") {
    return r.Error(n["add_bos"], "data.add_bos",
                   absl::StrCat("expected auto, true or false, got ", core::QuotedExcerpt(d->add_bos)));
  }
  for (auto [key, value] : {std::pair{"eos_token", &d->eos_token}, {"chat_template", &d->chat_template}}) {
    if (n[key].IsDefined() && !n[key].IsNull() && value->empty()) {
      return r.Error(n[key], absl::StrCat("data.", key), "is empty (leave it out for the tokenizer's own)");
    }
  }
  return absl::OkStatus();
}

// `eval: {every, data, max_samples}`.
absl::Status ParseEval(const YamlReader& r, const YAML::Node& root, EvalSpec* e) {
  const YAML::Node n = root["eval"];
  if (!n.IsDefined() || n.IsNull()) return absl::OkStatus();
  if (!n.IsMap()) return r.Error(n, "eval", "expected a mapping {every, data, max_samples}");
  ZF_RETURN_IF_ERROR(r.OnlyKeys(n, "eval.", {"every", "data", "max_samples"}));
  ZF_RETURN_IF_ERROR(r.Get(n, "every", "eval.every", &e->every, "an integer"));
  ZF_RETURN_IF_ERROR(r.Get(n, "data", "eval.data", &e->data, "a path"));
  ZF_RETURN_IF_ERROR(r.Get(n, "max_samples", "eval.max_samples", &e->max_samples, "an integer"));
  if (e->every < 0) return r.Error(n["every"], "eval.every", "must be >= 0 (0: after the last step only)");
  if (e->max_samples < 0) return r.Error(n["max_samples"], "eval.max_samples", "must be >= 0 (0: all)");
  return absl::OkStatus();
}

// `log_every: N` (N >= 1), after the training section: its default follows training.steps.
absl::Status ParseLogEvery(const YamlReader& r, const YAML::Node& root, JobSpec* s) {
  s->log_every = DefaultLogEvery(s->training.steps);
  const YAML::Node n = root["log_every"];
  if (!n.IsDefined() || n.IsNull()) return absl::OkStatus();
  ZF_RETURN_IF_ERROR(r.Get(root, "log_every", "log_every", &s->log_every, "a number of steps (an integer)"));
  if (s->log_every < 1) {
    return r.Error(n, "log_every",
                   absl::StrCat("must be >= 1 (a progress line every N steps in a pipe or file; leave it out "
                                "for about 1% of training.steps), got ",
                                s->log_every));
  }
  return absl::OkStatus();
}

// `watchdog: {step_time_factor, floor_s}`, or `watchdog: off` / `false`; checked by ValidateWatchdog.
absl::Status ParseWatchdog(const YamlReader& r, const YAML::Node& root, WatchdogSpec* w) {
  const YAML::Node n = root["watchdog"];
  if (!n.IsDefined() || n.IsNull()) return absl::OkStatus();
  if (n.IsScalar()) {
    if (n.Scalar() != "off" && n.Scalar() != "false") {
      return r.Error(n, "watchdog",
                     absl::StrCat("expected off, false or a mapping {step_time_factor, floor_s}, got ",
                                  core::QuotedExcerpt(n.Scalar())));
    }
    w->enabled = false;
    return absl::OkStatus();
  }
  if (!n.IsMap()) return r.Error(n, "watchdog", "expected off or a mapping {step_time_factor, floor_s}");
  ZF_RETURN_IF_ERROR(r.OnlyKeys(n, "watchdog.", {"step_time_factor", "floor_s"}));
  ZF_RETURN_IF_ERROR(
      r.Get(n, "step_time_factor", "watchdog.step_time_factor", &w->step_time_factor, "a number"));
  ZF_RETURN_IF_ERROR(r.Get(n, "floor_s", "watchdog.floor_s", &w->floor_s, "a number of seconds"));
  return ValidateWatchdog(*w, [&](const std::string& field, const std::string& why) {
    const std::string key = field.substr(field.find('.') + 1);
    return r.Error(n[key].IsDefined() ? n[key] : n, field, why);
  });
}

// ValidateTraining for a parsed spec, each error at the field that set the value: the `training:` entry,
// else the DeepSpeed config's field (`ds`, when the spec has one), else the section.
absl::Status ValidateTrainingAt(const YamlReader& r, const YAML::Node& root, const JobSpec& s,
                                const DeepSpeedTraining* ds) {
  const YAML::Node t = root["training"];
  return ValidateTraining(s.training, s.world_size, [&](const std::string& field, const std::string& why) {
    if (field == "world_size") return r.Error(root["world_size"], field, why);
    const std::string key = field.substr(field.find('.') + 1);
    if (t.IsDefined() && t.IsMap() && t[key].IsDefined()) return r.Error(t[key], field, why);
    if (ds != nullptr && ds->given.count(field)) {
      return absl::InvalidArgumentError(
          absl::StrCat(ds->source, ": field '", ds->given.at(field), "': ", why));
    }
    return r.Error(t.IsDefined() ? t : root, field, why);
  });
}

// A `deepspeed:` value that is the config itself (JSON), not a path to it.
bool IsInlineConfig(const std::string& value) {
  const size_t first = value.find_first_not_of(" \t");
  return first != std::string::npos && value[first] == '{';
}

std::string ResolvePath(const std::string& path, const std::string& base_dir) {
  const std::filesystem::path p(path);
  return (p.is_absolute() ? p : std::filesystem::path(base_dir) / p).string();
}

// The DeepSpeed config `node` names. Read on a client's behalf (by the coordinator, for a spec that did not
// come through zerofit submit): a FIFO or a device named here must not block the reader.
absl::StatusOr<std::string> ReadDeepSpeedFile(const YamlReader& r, const YAML::Node& node,
                                              const std::string& path, const std::string& base_dir) {
  auto ds = core::ReadRegularFile(ResolvePath(path, base_dir), kMaxDeepSpeedConfigBytes);
  if (!ds.ok()) {
    return r.Error(node, "deepspeed",
                   absl::StrCat("cannot read the DeepSpeed config: ", ds.status().message()));
  }
  return ds;
}

// The length of scalar `node`'s text as written at its mark in `text` (plain, or quoted without escapes), or
// 0 when it is written some other way (folded over lines, escapes).
size_t WrittenLength(const std::string& text, const YAML::Node& node) {
  const size_t pos = static_cast<size_t>(node.Mark().pos);
  const std::string& value = node.Scalar();
  if (pos >= text.size()) return 0;
  if (text.compare(pos, value.size(), value) == 0) return value.size();
  const char q = text[pos];
  if ((q == '"' || q == '\'') && text.compare(pos + 1, value.size(), value) == 0 &&
      pos + 1 + value.size() < text.size() && text[pos + 1 + value.size()] == q) {
    return value.size() + 2;
  }
  return 0;
}

}  // namespace

int FieldLine(const std::string& yaml_text, const std::string& field) {
  try {
    const YAML::Node root = YAML::Load(yaml_text);
    if (!root.IsMap()) return 0;
    const YAML::Node n = NodeOf(root, field);
    return n.IsDefined() ? n.Mark().line + 1 : 0;
  } catch (const YAML::Exception&) {
    return 0;
  }
}

absl::StatusOr<std::string> ReadJobSpecFile(const std::string& path) {
  auto text = core::ReadTextFile(path, kMaxJobSpecBytes);
  if (absl::IsNotFound(text.status())) return absl::NotFoundError(absl::StrCat("cannot read '", path, "'"));
  if (!text.ok())
    return absl::Status(text.status().code(), absl::StrCat(text.status().message(), " of a job spec"));
  return text;
}

std::string JobNameProblem(const std::string& name) {
  constexpr size_t kMaxNameBytes = 128;
  if (name.empty() || name.size() > kMaxNameBytes) {
    return absl::StrCat("must be 1..", kMaxNameBytes, " bytes, got ", name.size());
  }
  for (const unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) {
      return absl::StrCat(core::QuotedExcerpt(name),
                          " contains a control character (a newline, a tab, an "
                          "escape): give a name of printable characters");
    }
  }
  return "";
}

absl::Status ResumeFromCheckpointDir(JobSpec* spec, const std::string& yaml_text, const std::string& source) {
  const auto at = [&](const char* field) {
    const int line = FieldLine(yaml_text, field);
    return absl::StrCat(source, line > 0 ? absl::StrCat(":", line) : "", ": field '", field, "'");
  };
  if (spec->checkpoint.dir.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        at("checkpoint.dir"), ": required to resume (--resume): the directory to continue from"));
  }
  if (spec->checkpoint.overwrite) {
    return absl::InvalidArgumentError(absl::StrCat(at("checkpoint.overwrite"),
                                                   ": true, and it would remove the checkpoint --resume "
                                                   "continues from: set one of them"));
  }
  spec->checkpoint.resume = true;
  return absl::OkStatus();
}

absl::StatusOr<std::string> InlineDeepSpeedConfig(const std::string& text, const std::string& source,
                                                  const std::string& base_dir) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception&) {
    return text;  // the coordinator's ParseJobSpec names the line
  }
  if (!root.IsMap()) return text;
  const YAML::Node node = root["deepspeed"];
  if (!node.IsDefined() || !node.IsScalar() || IsInlineConfig(node.Scalar())) return text;
  const YamlReader r(source);
  const size_t length = WrittenLength(text, node);
  if (length == 0) return r.Error(node, "deepspeed", "write the path on one line, without escapes");
  ZF_ASSIGN_OR_RETURN(const std::string ds, ReadDeepSpeedFile(r, node, node.Scalar(), base_dir));
  const Json j = Json::parse(ds, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return r.Error(node, "deepspeed",
                   absl::StrCat(ResolvePath(node.Scalar(), base_dir), ": not a JSON object"));
  }
  std::string quoted = "'";  // YAML single quotes: only ' itself is escaped (''); dump() writes one line
  for (const char c : j.dump()) quoted += c == '\'' ? std::string("''") : std::string(1, c);
  quoted += "'";
  const size_t pos = static_cast<size_t>(node.Mark().pos);
  return absl::StrCat(text.substr(0, pos), quoted, text.substr(pos + length));
}

namespace {

// slurm: (optional): sbatch's resources and the job's policy on a lost node; sets world_size when the spec
// leaves it out, and checks it against nodes x ranks per node when given.
absl::Status ParseSlurm(const YamlReader& r, const YAML::Node& root, JobSpec* s) {
  const YAML::Node n = root["slurm"];
  if (!n.IsDefined()) return absl::OkStatus();
  if (!n.IsMap()) return r.Error(n, "slurm", "expected a mapping");
  ZF_RETURN_IF_ERROR(r.OnlyKeys(n, "slurm.",
                                {"nodes", "gpus_per_node", "tasks_per_node", "cpus_per_task", "mem", "time",
                                 "partition", "account", "qos", "signal_seconds", "requeue", "state_dir",
                                 "coordinator", "port", "extra", "on_node_loss", "min_nodes"}));
  SlurmSpec& x = s->slurm.emplace();
  ZF_RETURN_IF_ERROR(r.Get(n, "nodes", "slurm.nodes", &x.nodes, "an integer"));
  ZF_RETURN_IF_ERROR(r.Get(n, "gpus_per_node", "slurm.gpus_per_node", &x.gpus_per_node, "an integer"));
  ZF_RETURN_IF_ERROR(r.Get(n, "tasks_per_node", "slurm.tasks_per_node", &x.tasks_per_node, "an integer"));
  ZF_RETURN_IF_ERROR(r.Get(n, "cpus_per_task", "slurm.cpus_per_task", &x.cpus_per_task, "an integer"));
  ZF_RETURN_IF_ERROR(r.Get(n, "mem", "slurm.mem", &x.mem, "a memory size (480G)"));
  ZF_RETURN_IF_ERROR(r.Get(n, "time", "slurm.time", &x.time, "a time limit (04:00:00)"));
  ZF_RETURN_IF_ERROR(r.Get(n, "partition", "slurm.partition", &x.partition, "a string"));
  ZF_RETURN_IF_ERROR(r.Get(n, "account", "slurm.account", &x.account, "a string"));
  ZF_RETURN_IF_ERROR(r.Get(n, "qos", "slurm.qos", &x.qos, "a string"));
  ZF_RETURN_IF_ERROR(r.Get(n, "signal_seconds", "slurm.signal_seconds", &x.signal_seconds, "an integer"));
  ZF_RETURN_IF_ERROR(r.Get(n, "requeue", "slurm.requeue", &x.requeue, "true or false"));
  ZF_RETURN_IF_ERROR(r.Get(n, "state_dir", "slurm.state_dir", &x.state_dir, "a path"));
  ZF_RETURN_IF_ERROR(r.Get(n, "coordinator", "slurm.coordinator", &x.coordinator, "host:port"));
  ZF_RETURN_IF_ERROR(r.Get(n, "port", "slurm.port", &x.port, "an integer"));
  ZF_RETURN_IF_ERROR(r.Get(n, "min_nodes", "slurm.min_nodes", &x.min_nodes, "an integer"));
  std::string loss;
  ZF_RETURN_IF_ERROR(r.Get(n, "on_node_loss", "slurm.on_node_loss", &loss, "wait or shrink"));
  if (!loss.empty() && loss != "wait" && loss != "shrink") {
    return r.Error(n["on_node_loss"], "slurm.on_node_loss",
                   absl::StrCat("expected wait or shrink, got ", core::QuotedExcerpt(loss)));
  }
  if (loss == "shrink") x.on_node_loss = NodeLoss::kShrink;
  if (n["min_nodes"].IsDefined() && x.min_nodes < 1) {
    return r.Error(n["min_nodes"], "slurm.min_nodes", "must be >= 1");
  }
  if (const YAML::Node e = n["extra"]; e.IsDefined() && !e.IsNull()) {
    if (!e.IsSequence()) return r.Error(e, "slurm.extra", "expected a list of sbatch options");
    for (size_t i = 0; i < e.size(); ++i) {
      const std::string field = absl::StrCat("slurm.extra[", i, "]");
      if (!e[i].IsScalar()) return r.Error(e[i], field, "expected an sbatch option");
      const std::string opt = e[i].Scalar();
      if (opt.rfind("--", 0) != 0 || opt.find('\n') != std::string::npos) {
        return r.Error(
            e[i], field,
            absl::StrCat("expected one long sbatch option (--name=value), got ", core::QuotedExcerpt(opt)));
      }
      x.extra.push_back(opt);
    }
  }
  // Errors that name a field point at its line.
  auto at = [&](const char* key) { return n[key].IsDefined() ? n[key] : n; };
  if (x.nodes < 1) return r.Error(at("nodes"), "slurm.nodes", "must be >= 1");
  if (x.gpus_per_node < 0) return r.Error(at("gpus_per_node"), "slurm.gpus_per_node", "must be >= 0");
  if (x.tasks_per_node < 0) return r.Error(at("tasks_per_node"), "slurm.tasks_per_node", "must be >= 0");
  if (x.cpus_per_task < 0) return r.Error(at("cpus_per_task"), "slurm.cpus_per_task", "must be >= 0");
  if (x.signal_seconds < 0 || x.signal_seconds > 65535) {
    return r.Error(at("signal_seconds"), "slurm.signal_seconds", "must be 0..65535 seconds");
  }
  if (x.port < 0 || x.port > 65535) return r.Error(at("port"), "slurm.port", "must be 0..65535");
  if (x.ranks_per_node() < 1) {
    return r.Error(at("tasks_per_node"), "slurm.tasks_per_node",
                   "required (>= 1) when slurm.gpus_per_node is 0");
  }
  if (s->world_size_given && s->world_size != x.nodes * x.ranks_per_node()) {
    return r.Error(root["world_size"], "world_size",
                   absl::StrCat(s->world_size, " != slurm.nodes x ranks per node = ", x.nodes, " x ",
                                x.ranks_per_node()));
  }
  if (!s->world_size_given) s->world_size = x.nodes * x.ranks_per_node();
  return absl::OkStatus();
}

// deepspeed: a DeepSpeed JSON config (a file, or inline as `zerofit submit` sends it) as the training
// section.
absl::Status ParseDeepSpeedSection(const YamlReader& r, const YAML::Node& root, const std::string& source,
                                   const std::string& base_dir, JobSpec* s,
                                   std::optional<DeepSpeedTraining>* out) {
  if (!root["deepspeed"].IsDefined()) return absl::OkStatus();
  std::string path;
  ZF_RETURN_IF_ERROR(r.Get(root, "deepspeed", "deepspeed", &path, "a path to a DeepSpeed JSON config"));
  if (IsInlineConfig(path)) {  // sent by zerofit submit (InlineDeepSpeedConfig)
    const std::string where = absl::StrCat(source, ":", root["deepspeed"].Mark().line + 1, ": deepspeed");
    ZF_ASSIGN_OR_RETURN(*out, ReadDeepSpeedConfig(path, where, s->world_size));
  } else {
    ZF_ASSIGN_OR_RETURN(const std::string ds, ReadDeepSpeedFile(r, root["deepspeed"], path, base_dir));
    ZF_ASSIGN_OR_RETURN(*out, ReadDeepSpeedConfig(ds, ResolvePath(path, base_dir), s->world_size));
  }
  s->training = (*out)->training;
  return absl::OkStatus();
}

// training: next to `deepspeed:` (`ds`), only what the DeepSpeed config leaves out or says "auto" for.
absl::Status ParseTraining(const YamlReader& r, const YAML::Node& root, const DeepSpeedTraining* ds,
                           TrainingSpec* out) {
  const YAML::Node t = root["training"];
  if (!t.IsDefined()) return absl::OkStatus();
  if (!t.IsMap()) return r.Error(t, "training", "expected a mapping");
  ZF_RETURN_IF_ERROR(r.OnlyKeys(
      t, "training.",
      {"steps", "global_batch", "micro_batch", "gradient_accumulation", "lr", "lr_schedule", "warmup_steps",
       "min_lr", "weight_decay", "max_grad_norm", "zero_stage", "offload", "delayed_update_from", "optim",
       "min_8bit_size", "checkpointing", "bf16", "max_length", "seed"}));
  if (ds != nullptr) {
    // One place for each value, as Hugging Face asks of a DeepSpeed config next to its TrainingArguments.
    for (const auto& kv : t) {
      ZF_ASSIGN_OR_RETURN(const std::string key, r.KeyName(kv.first, "training."));
      const auto set = ds->given.find("training." + key);
      if (set != ds->given.end()) {
        return r.Error(kv.first, "training." + key,
                       absl::StrCat("set in the DeepSpeed config too ('", set->second,
                                    "'): give it in one place (\"auto\" there leaves it to 'training:')"));
      }
    }
  }
  TrainingSpec& x = *out;
  ZF_RETURN_IF_ERROR(r.Get(t, "steps", "training.steps", &x.steps, "an integer"));
  ZF_RETURN_IF_ERROR(r.Get(t, "global_batch", "training.global_batch", &x.global_batch, "an integer"));
  ZF_RETURN_IF_ERROR(r.GetOptional(t, "micro_batch", "training.micro_batch", &x.micro_batch, "an integer"));
  ZF_RETURN_IF_ERROR(r.GetOptional(t, "gradient_accumulation", "training.gradient_accumulation",
                                   &x.gradient_accumulation, "an integer"));
  ZF_RETURN_IF_ERROR(r.Get(t, "lr", "training.lr", &x.lr, "a number"));
  std::string decay;
  ZF_RETURN_IF_ERROR(r.Get(t, "lr_schedule", "training.lr_schedule", &decay, "constant, linear or cosine"));
  if (!decay.empty()) {
    auto parsed = core::ParseLrDecay(decay);
    if (!parsed.ok())
      return r.Error(t["lr_schedule"], "training.lr_schedule", std::string(parsed.status().message()));
    x.lr_schedule = *parsed;
  }
  ZF_RETURN_IF_ERROR(r.Get(t, "warmup_steps", "training.warmup_steps", &x.warmup_steps, "an integer"));
  ZF_RETURN_IF_ERROR(r.Get(t, "min_lr", "training.min_lr", &x.min_lr, "a number"));
  ZF_RETURN_IF_ERROR(r.Get(t, "weight_decay", "training.weight_decay", &x.weight_decay, "a number"));
  ZF_RETURN_IF_ERROR(r.Get(t, "max_grad_norm", "training.max_grad_norm", &x.max_grad_norm, "a number"));
  ZF_RETURN_IF_ERROR(r.Get(t, "zero_stage", "training.zero_stage", &x.zero_stage, "an integer"));
  ZF_RETURN_IF_ERROR(r.Get(t, "offload", "training.offload", &x.offload, "true or false"));
  ZF_RETURN_IF_ERROR(
      r.GetOptional(t, "checkpointing", "training.checkpointing", &x.checkpointing, "true or false"));
  ZF_RETURN_IF_ERROR(r.Get(t, "bf16", "training.bf16", &x.bf16, "true or false"));
  ZF_RETURN_IF_ERROR(r.Get(t, "max_length", "training.max_length", &x.max_length, "an integer"));
  ZF_RETURN_IF_ERROR(r.GetOptional(t, "delayed_update_from", "training.delayed_update_from",
                                   &x.delayed_update_from, "an integer"));
  ZF_RETURN_IF_ERROR(r.Get(t, "seed", "training.seed", &x.seed, "an integer"));
  std::string optim;
  ZF_RETURN_IF_ERROR(r.Get(t, "optim", "training.optim", &optim, "an optimizer name"));
  if (!optim.empty()) {
    auto kind = ParseOptimizerName(optim);
    if (!kind.ok()) return r.Error(t["optim"], "training.optim", std::string(kind.status().message()));
    x.optimizer.kind = *kind;
  }
  ZF_RETURN_IF_ERROR(
      r.Get(t, "min_8bit_size", "training.min_8bit_size", &x.optimizer.min_8bit_size, "an integer"));
  if (x.lr_schedule != core::LrDecay::kConstant && x.decay_steps == 0 && x.steps <= x.warmup_steps) {
    return r.Error(t["warmup_steps"].IsDefined() ? t["warmup_steps"] : t["lr_schedule"],
                   "training.warmup_steps",
                   absl::StrCat("a ", core::LrDecayName(x.lr_schedule), " decay needs steps (", x.steps,
                                ") > warmup_steps (", x.warmup_steps, ")"));
  }
  return absl::OkStatus();
}

// dpo: the DPO loss, task dpo only.
absl::Status ParseDpo(const YamlReader& r, const YAML::Node& root, const std::string& task, DpoSpec* d) {
  const YAML::Node n = root["dpo"];
  if (!n.IsDefined() || n.IsNull()) return absl::OkStatus();
  if (task != "dpo") return r.Error(n, "dpo", absl::StrCat("applies to task dpo only, not ", task));
  if (!n.IsMap()) {
    return r.Error(n, "dpo",
                   "expected a mapping {beta, loss_type, label_smoothing, simpo_gamma, discopop_tau, "
                   "ld_alpha, rpo_alpha, reference_free}");
  }
  ZF_RETURN_IF_ERROR(r.OnlyKeys(n, "dpo.",
                                {"beta", "loss_type", "label_smoothing", "simpo_gamma", "discopop_tau",
                                 "ld_alpha", "rpo_alpha", "reference_free"}));
  ZF_RETURN_IF_ERROR(r.Get(n, "beta", "dpo.beta", &d->beta, "a number"));
  ZF_RETURN_IF_ERROR(r.Get(n, "loss_type", "dpo.loss_type", &d->loss_type, "a DPO loss name"));
  ZF_RETURN_IF_ERROR(r.Get(n, "label_smoothing", "dpo.label_smoothing", &d->label_smoothing, "a number"));
  ZF_RETURN_IF_ERROR(r.Get(n, "simpo_gamma", "dpo.simpo_gamma", &d->simpo_gamma, "a number"));
  ZF_RETURN_IF_ERROR(r.Get(n, "discopop_tau", "dpo.discopop_tau", &d->discopop_tau, "a number"));
  ZF_RETURN_IF_ERROR(r.Get(n, "ld_alpha", "dpo.ld_alpha", &d->ld_alpha, "a number"));
  ZF_RETURN_IF_ERROR(r.Get(n, "rpo_alpha", "dpo.rpo_alpha", &d->rpo_alpha, "a number"));
  ZF_RETURN_IF_ERROR(r.Get(n, "reference_free", "dpo.reference_free", &d->reference_free, "true or false"));
  return ValidateDpoSpec(*d, [&](const std::string& field, const std::string& why) {
    const YAML::Node at = n[field.substr(field.find('.') + 1)];
    return r.Error(at.IsDefined() ? at : n, field, why);
  });
}

// reward: the reward model's centring term, task reward only.
absl::Status ParseRewardLoss(const YamlReader& r, const YAML::Node& root, const std::string& task,
                             RewardLossSpec* s) {
  const YAML::Node n = root["reward"];
  if (!n.IsDefined() || n.IsNull()) return absl::OkStatus();
  if (task != "reward") {
    return r.Error(n, "reward",
                   absl::StrCat("applies to task reward only, not ", task,
                                task == "grpo" ? " (GRPO's reward functions: the rewards list)" : ""));
  }
  if (!n.IsMap()) return r.Error(n, "reward", "expected a mapping {center_rewards_coefficient}");
  ZF_RETURN_IF_ERROR(r.OnlyKeys(n, "reward.", {"center_rewards_coefficient"}));
  ZF_RETURN_IF_ERROR(r.Get(n, "center_rewards_coefficient", "reward.center_rewards_coefficient",
                           &s->center_rewards_coefficient, "a number"));
  return ValidateRewardLossSpec(*s, [&](const std::string& field, const std::string& why) {
    return r.Error(n["center_rewards_coefficient"], field, why);
  });
}

// sft: which tokens SFT's loss scores, task sft only.
absl::Status ParseSft(const YamlReader& r, const YAML::Node& root, const std::string& task, SftSpec* s) {
  const YAML::Node n = root["sft"];
  if (!n.IsDefined() || n.IsNull()) return absl::OkStatus();
  if (task != "sft") return r.Error(n, "sft", absl::StrCat("applies to task sft only, not ", task));
  if (!n.IsMap()) return r.Error(n, "sft", "expected a mapping {completion_only_loss, assistant_only_loss}");
  ZF_RETURN_IF_ERROR(r.OnlyKeys(n, "sft.", {"completion_only_loss", "assistant_only_loss"}));
  ZF_RETURN_IF_ERROR(r.Get(n, "completion_only_loss", "sft.completion_only_loss", &s->completion_only_loss,
                           "true or false"));
  return r.Get(n, "assistant_only_loss", "sft.assistant_only_loss", &s->assistant_only_loss, "true or false");
}

absl::Status ParseLora(const YamlReader& r, const YAML::Node& root, LoraSpec* l) {
  const YAML::Node n = root["lora"];
  if (!n.IsDefined() || n.IsNull()) return absl::OkStatus();
  if (!n.IsMap()) return r.Error(n, "lora", "expected a mapping {rank, alpha, dropout, target_modules}");
  ZF_RETURN_IF_ERROR(r.OnlyKeys(n, "lora.", {"rank", "alpha", "dropout", "target_modules"}));
  if (!n["rank"].IsDefined() || n["rank"].IsNull()) {
    return r.Error(n, "lora.rank", "required: the adapters' rank, an integer >= 1");
  }
  ZF_RETURN_IF_ERROR(r.Get(n, "rank", "lora.rank", &l->rank, "an integer"));
  ZF_RETURN_IF_ERROR(r.Get(n, "alpha", "lora.alpha", &l->alpha, "a number"));
  ZF_RETURN_IF_ERROR(r.Get(n, "dropout", "lora.dropout", &l->dropout, "a number"));
  if (const YAML::Node t = n["target_modules"]; t.IsDefined() && !t.IsNull()) {
    if (!t.IsSequence()) return r.Error(t, "lora.target_modules", "expected a list of layer names");
    l->target_modules.clear();
    for (size_t i = 0; i < t.size(); ++i) {
      if (!t[i].IsScalar()) return r.Error(t[i], "lora.target_modules", "expected a layer name");
      l->target_modules.push_back(t[i].Scalar());
    }
  }
  return ValidateLoraSpec(*l, [&](const std::string& field, const std::string& why) {
    const YAML::Node at = n[field.substr(field.find('.') + 1)];
    return r.Error(at.IsDefined() ? at : n, field, why);
  });
}

absl::Status ParseCheckpoint(const YamlReader& r, const YAML::Node& root, CheckpointSpec* ck) {
  const YAML::Node c = root["checkpoint"];
  if (!c.IsDefined()) return absl::OkStatus();
  if (!c.IsMap()) return r.Error(c, "checkpoint", "expected a mapping");
  ZF_RETURN_IF_ERROR(r.OnlyKeys(c, "checkpoint.", {"dir", "every", "keep", "overwrite", "resume"}));
  ZF_RETURN_IF_ERROR(r.Get(c, "dir", "checkpoint.dir", &ck->dir, "a path"));
  ZF_RETURN_IF_ERROR(r.Get(c, "every", "checkpoint.every", &ck->every, "an integer"));
  ZF_RETURN_IF_ERROR(r.Get(c, "keep", "checkpoint.keep", &ck->keep, "an integer"));
  ZF_RETURN_IF_ERROR(r.Get(c, "overwrite", "checkpoint.overwrite", &ck->overwrite, "true or false"));
  ZF_RETURN_IF_ERROR(r.Get(c, "resume", "checkpoint.resume", &ck->resume, "true or false"));
  if (ck->every < 1) return r.Error(c["every"], "checkpoint.every", "must be >= 1");
  if (ck->keep < 1) return r.Error(c["keep"], "checkpoint.keep", "must be >= 1");
  if (ck->resume && ck->overwrite) {
    return r.Error(
        c["resume"], "checkpoint.resume",
        "continues from the checkpoint in checkpoint.dir, which checkpoint.overwrite would remove: "
        "set one of them");
  }
  if (ck->resume && ck->dir.empty()) {
    return r.Error(c["resume"], "checkpoint.resume", "needs checkpoint.dir: the directory to continue from");
  }
  return absl::OkStatus();
}

// metrics: the sinks every step's named metrics also go to.
absl::Status ParseMetrics(const YamlReader& r, const YAML::Node& root, MetricsSpec* ms) {
  const YAML::Node m = root["metrics"];
  if (!m.IsDefined()) return absl::OkStatus();
  if (!m.IsMap()) return r.Error(m, "metrics", "expected a mapping");
  ZF_RETURN_IF_ERROR(r.OnlyKeys(m, "metrics.", {"tensorboard", "jsonl"}));
  ZF_RETURN_IF_ERROR(r.Get(m, "tensorboard", "metrics.tensorboard", &ms->tensorboard, "a directory"));
  ZF_RETURN_IF_ERROR(r.Get(m, "jsonl", "metrics.jsonl", &ms->jsonl, "a file path"));
  if (m["tensorboard"].IsDefined() && ms->tensorboard.empty()) {
    return r.Error(m["tensorboard"], "metrics.tensorboard", "must be a non-empty directory");
  }
  if (m["jsonl"].IsDefined() && ms->jsonl.empty()) {
    return r.Error(m["jsonl"], "metrics.jsonl", "must be a non-empty file path");
  }
  return absl::OkStatus();
}

// ParseJobSpec's work; yaml-cpp's exceptions may leave it (ParseJobSpec translates them).
absl::StatusOr<JobSpec> ParseYamlJobSpec(const std::string& text, const std::string& source,
                                         const std::string& base_dir) {
  const YAML::Node root = YAML::Load(text);
  const YamlReader r(source);
  if (!root.IsMap())
    return absl::InvalidArgumentError(absl::StrCat(source, ": expected a mapping of fields"));
  ZF_RETURN_IF_ERROR(r.OnlyKeys(
      root, "", {"name",   "task",     "model",     "data",       "world_size", "hardware", "max_restarts",
                 "device", "training", "deepspeed", "checkpoint", "metrics",    "slurm",    "eval",
                 "export", "watchdog", "log_every", "rollout",    "grpo",       "rewards",  "lora",
                 "dpo",    "init",     "reward",    "sft"}));
  JobSpec s;
  ZF_RETURN_IF_ERROR(r.Get(root, "name", "name", &s.name, "a string"));
  ZF_RETURN_IF_ERROR(r.Get(root, "task", "task", &s.task, "a string"));
  ZF_RETURN_IF_ERROR(r.Get(root, "model", "model", &s.model, "a string"));
  ZF_RETURN_IF_ERROR(r.Get(root, "init", "init", &s.init, "a safetensors file or model directory"));
  ZF_RETURN_IF_ERROR(ParseData(r, root, &s.data));
  ZF_RETURN_IF_ERROR(ParseEval(r, root, &s.eval));
  const bool eval_given = root["eval"].IsDefined() && root["eval"].IsMap();
  if (eval_given && s.data.dir.empty() && s.data.test.empty() && s.eval.data.empty()) {
    // TRL refuses an eval strategy without an eval dataset too; the directory form has its test file.
    return r.Error(
        root["eval"], "eval",
        "no held-out data to evaluate: give data.test or eval.data (or leave the eval section out)");
  }
  ZF_RETURN_IF_ERROR(ParseWatchdog(r, root, &s.watchdog));
  ZF_RETURN_IF_ERROR(r.Get(root, "export", "export", &s.export_dir, "a directory"));
  ZF_RETURN_IF_ERROR(r.Get(root, "world_size", "world_size", &s.world_size, "an integer"));
  s.world_size_given = root["world_size"].IsDefined() && !root["world_size"].IsNull();
  ZF_RETURN_IF_ERROR(r.Get(root, "hardware", "hardware", &s.hardware, "a string"));
  ZF_RETURN_IF_ERROR(r.Get(root, "max_restarts", "max_restarts", &s.max_restarts, "an integer"));
  ZF_RETURN_IF_ERROR(r.Get(root, "device", "device", &s.device, "a string"));
  if (s.device != "auto" && s.device != "cpu" && s.device != "cuda") {
    return r.Error(root["device"], "device",
                   absl::StrCat("expected auto, cpu or cuda, got ", core::QuotedExcerpt(s.device)));
  }
  ZF_RETURN_IF_ERROR(r.Required(root["task"], "task", s.task, "reward, dpo, sft or grpo"));
  if (s.task != "reward" && s.task != "dpo" && s.task != "sft" && s.task != "grpo") {
    return r.Error(root["task"], "task",
                   absl::StrCat("expected reward, dpo, sft or grpo, got ", core::QuotedExcerpt(s.task)));
  }
  ZF_RETURN_IF_ERROR(r.Required(root["model"], "model", s.model, "a model directory or name"));
  ZF_RETURN_IF_ERROR(r.Required(root["data"], "data", s.data.dir + s.data.train, "a directory or a mapping"));
  ZF_RETURN_IF_ERROR(
      r.Required(root["hardware"], "hardware", s.hardware, "such as 8x80GB; leave it out for 8x64GB"));
  if (auto hw = planner::ParseHardware(s.hardware); !hw.ok()) {
    return r.Error(root["hardware"], "hardware", std::string(hw.status().message()));
  }
  if (root["name"].IsDefined()) {
    if (const std::string why = JobNameProblem(s.name); !why.empty())
      return r.Error(root["name"], "name", why);
  }
  if (s.name.empty()) s.name = s.task;
  if (s.world_size < 1 || s.world_size > 4096)
    return r.Error(root["world_size"], "world_size", "must be 1..4096");
  if (s.max_restarts < 0) return r.Error(root["max_restarts"], "max_restarts", "must be >= 0");

  ZF_RETURN_IF_ERROR(ParseSlurm(r, root, &s));
  std::optional<DeepSpeedTraining> ds;
  ZF_RETURN_IF_ERROR(ParseDeepSpeedSection(r, root, source, base_dir, &s, &ds));
  ZF_RETURN_IF_ERROR(ParseTraining(r, root, ds ? &*ds : nullptr, &s.training));
  if (ds) ZF_RETURN_IF_ERROR(FinishDeepSpeedTraining(*ds, &s.training));
  ZF_RETURN_IF_ERROR(ValidateTrainingAt(r, root, s, ds ? &*ds : nullptr));
  if (s.slurm) {
    // After the training section: the global batch must fit every world size the job may shrink to.
    const YAML::Node n = root["slurm"];
    ZF_RETURN_IF_ERROR(
        ValidateNodeLoss(s.training, *s.slurm, [&](const std::string& field, const std::string& why) {
          const std::string key = field.substr(field.find('.') + 1);
          if (n[key].IsDefined()) return r.Error(n[key], field, why);
          return r.Error(n["on_node_loss"].IsDefined() ? n["on_node_loss"] : n, field, why);
        }));
  }
  // The workers' truncation keeps at least one response token; refused here rather than on every rank.
  if (s.data.max_prompt_length >= s.training.max_length) {
    return r.Error(root["data"]["max_prompt_length"], "data.max_prompt_length",
                   absl::StrCat(s.data.max_prompt_length, " must be less than training.max_length (",
                                s.training.max_length, ")"));
  }
  if (absl::Status bad = core::ValidateLrSchedule(LrScheduleOf(s.training)); !bad.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": field 'training.lr_schedule': ", bad.message()));
  }
  ZF_RETURN_IF_ERROR(ParseGrpoSections(r, root, s.task, s.training.max_length, &s.grpo));
  ZF_RETURN_IF_ERROR(ParseLogEvery(r, root, &s));
  ZF_RETURN_IF_ERROR(ParseDpo(r, root, s.task, &s.dpo));
  ZF_RETURN_IF_ERROR(ParseRewardLoss(r, root, s.task, &s.reward));
  ZF_RETURN_IF_ERROR(ParseSft(r, root, s.task, &s.sft));
  ZF_RETURN_IF_ERROR(ParseLora(r, root, &s.lora));
  ZF_RETURN_IF_ERROR(ParseCheckpoint(r, root, &s.checkpoint));
  ZF_RETURN_IF_ERROR(ParseMetrics(r, root, &s.metrics));
  return s;
}

}  // namespace

int64_t DefaultLogEvery(int64_t steps) { return std::max<int64_t>(1, steps / 100); }

absl::StatusOr<JobSpec> ParseJobSpec(const std::string& text, const std::string& source,
                                     const std::string& base_dir) {
  // yaml-cpp reports errors by exception (a syntax error, or a conversion the checks above missed);
  // translated here, where the library is called (STYLE 2), so that none reaches a gRPC handler.
  try {
    return ParseYamlJobSpec(text, source, base_dir);
  } catch (const YAML::ParserException& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ":", e.mark.line + 1, ": not valid YAML: ", e.msg));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, e.mark.is_null() ? "" : absl::StrCat(":", e.mark.line + 1), ": ", e.msg));
  }
}

absl::Status ValidateSlurm(const JobSpec& spec, const SlurmSpec& x, const std::string& source) {
  auto bad = [&](const char* field, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": field '", field, "': ", why));
  };
  if (x.nodes < 1) return bad("slurm.nodes", "must be >= 1");
  if (x.gpus_per_node < 0) return bad("slurm.gpus_per_node", "must be >= 0");
  if (x.tasks_per_node < 0) return bad("slurm.tasks_per_node", "must be >= 0");
  if (x.ranks_per_node() < 1) return bad("slurm.tasks_per_node", "required (>= 1) when gpus_per_node is 0");
  if (x.cpus_per_task < 0) return bad("slurm.cpus_per_task", "must be >= 0");
  if (x.signal_seconds < 0 || x.signal_seconds > 65535)
    return bad("slurm.signal_seconds", "must be 0..65535");
  if (x.port < 0 || x.port > 65535) return bad("slurm.port", "must be 0..65535");
  if (spec.world_size_given && spec.world_size != x.nodes * x.ranks_per_node()) {
    return bad("world_size", absl::StrCat(spec.world_size, " != slurm.nodes x ranks per node = ", x.nodes,
                                          " x ", x.ranks_per_node()));
  }
  if (x.min_nodes < 0) return bad("slurm.min_nodes", "must be >= 1");
  ZF_RETURN_IF_ERROR(ValidateNodeLoss(
      spec.training, x,
      [&](const std::string& field, const std::string& why) { return bad(field.c_str(), why); }));
  for (const std::string& v : {x.mem, x.time, x.partition, x.account, x.qos, x.coordinator}) {
    if (v.find_first_of("\n\r'\"`$\\ ") != std::string::npos) {
      return bad("slurm",
                 absl::StrCat(core::QuotedExcerpt(v), " contains whitespace, quotes or shell characters"));
    }
  }
  return absl::OkStatus();
}

namespace {

// `text` with `value` in place of the plain scalar that starts at (line, column), 0-based, `length` long.
absl::StatusOr<std::string> ReplaceAt(const std::string& text, int line, int column, size_t length,
                                      const std::string& value) {
  size_t pos = 0;
  for (int l = 0; l < line && pos != std::string::npos; ++l) {
    pos = text.find('\n', pos);
    if (pos != std::string::npos) ++pos;
  }
  if (pos == std::string::npos || pos + column + length > text.size()) {
    return absl::InternalError("the spec changed under its own parse");
  }
  return absl::StrCat(text.substr(0, pos + column), value, text.substr(pos + column + length));
}

// One field of SetSlurmFields.
absl::StatusOr<std::string> SetSlurmField(const std::string& text, const std::string& source,
                                          const std::string& key, const std::string& value) {
  const YAML::Node root = YAML::Load(text);
  const YAML::Node n = root.IsMap() ? root["slurm"] : YAML::Node();
  if (!n.IsDefined()) {  // a section of its own, appended like world_size
    const bool newline = text.empty() || text.back() == '\n';
    return absl::StrCat(text, newline ? "" : "\n", "slurm:  # added by zerofit slurm\n  ", key, ": ", value,
                        "\n");
  }
  if (!n.IsMap() || n.size() == 0 || n.Style() == YAML::EmitterStyle::Flow) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": field 'slurm.", key,
                                                   "': cannot set it in a flow-style or empty slurm section; "
                                                   "write ",
                                                   key, ": ", value, " into the spec"));
  }
  if (const YAML::Node v = n[key]; v.IsDefined()) {
    // Only a plain scalar is replaced in place; SetSlurmFields' read-back catches anything else.
    return ReplaceAt(text, v.Mark().line, v.Mark().column, v.IsScalar() ? v.Scalar().size() : 0, value);
  }
  // A new first entry of the block, indented like the entry that is there now.
  const YAML::Node first = n.begin()->first;
  return ReplaceAt(
      text, first.Mark().line, 0, 0,
      absl::StrCat(std::string(first.Mark().column, ' '), key, ": ", value, "  # added by zerofit slurm\n"));
}

}  // namespace

absl::StatusOr<std::string> SetSlurmFields(const std::string& text, const std::string& source,
                                           const std::vector<std::pair<std::string, std::string>>& values) {
  std::string out = text;
  try {
    for (const auto& [key, value] : values) {
      ZF_ASSIGN_OR_RETURN(out, SetSlurmField(out, source, key, value));
    }
    // Every value must read back as written (a quoted or multi-line scalar would not have been replaced
    // whole).
    const YAML::Node again = YAML::Load(out)["slurm"];
    for (const auto& [key, value] : values) {
      if (!again.IsMap() || !again[key].IsScalar() || again[key].Scalar() != value) {
        return absl::InvalidArgumentError(absl::StrCat(source, ": field 'slurm.", key,
                                                       "': cannot set it in this spec; write ", key, ": ",
                                                       value, " into its slurm section"));
      }
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", e.msg));
  }
  return out;
}
}  // namespace zerofit::jobspec
