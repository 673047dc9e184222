#include <map>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/checked_math.h"
#include "core/excerpt.h"
#include "core/json_depth.h"
#include "core/lr_schedule.h"
#include "core/status_macros.h"
#include "jobspec/job_spec.h"
#include "jobspec/training_validation.h"
#include "nlohmann/json.hpp"

// ParseDeepSpeedConfig (jobspec/job_spec.h): a DeepSpeed JSON config as zerofit's training section, section
// by section, with errors that name the file and DeepSpeed's own field.
namespace zerofit::jobspec {
namespace {

using Json = nlohmann::json;

// The training field each DeepSpeed key sets (YAML name, DeepSpeed name).
constexpr std::pair<const char*, const char*> kFields[] = {
    {"training.micro_batch", "train_micro_batch_size_per_gpu"},
    {"training.gradient_accumulation", "gradient_accumulation_steps"},
    {"training.global_batch", "train_batch_size"},
    {"training.max_grad_norm", "gradient_clipping"},
    {"training.zero_stage", "zero_optimization.stage"},
    {"training.offload", "zero_optimization.offload_optimizer.device"},
    {"training.bf16", "bf16.enabled"},
    {"training.optim", "optimizer.type"},
    {"training.lr", "optimizer.params.lr"},
    {"training.lr", "scheduler.params.warmup_max_lr"},
    {"training.weight_decay", "optimizer.params.weight_decay"},
    {"training.lr_schedule", "scheduler.type"},
    {"training.warmup_steps", "scheduler.params.warmup_num_steps"},
    {"training.decay_steps", "scheduler.params.total_num_steps"},
    {"training.min_lr", "scheduler.params.cos_min_ratio"},
    {"training.checkpointing", "activation_checkpointing"},
};

// For errors that ValidateTraining reports by the YAML name.
std::string DeepSpeedName(const std::string& field) {
  for (const auto& [yaml, ds] : kFields) {
    if (field == yaml) return ds;
  }
  return field;
}

bool IsAuto(const Json& v) { return v.is_string() && v.get<std::string>() == "auto"; }

// The DeepSpeed config's fields, read with errors naming the file and the field (DeepSpeed's name). "auto"
// (Hugging Face's: "from the training arguments") reads as left out: the spec's `training:` section, or
// zerofit's own choice where it gives none (the planner's micro-batch and accumulation), sets the field.
// Every field read with a value is noted in `given` under its YAML name.
class DsReader {
 public:
  // `given` null: a reader for errors only (after the fields were read).
  explicit DsReader(const std::string& source, std::map<std::string, std::string>* given = nullptr)
      : source_(source), given_(given) {}
  absl::Status Bad(const std::string& field, const std::string& why) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": field '", field, "': ", why));
  }
  // Notes that the config set the training field DeepSpeed calls `field` (the last key read that sets it
  // is the one whose value it has: the WarmupLR family's warmup_max_lr over optimizer.params.lr).
  void Given(const std::string& field) const {
    for (const auto& [yaml, ds] : kFields) {
      if (field == ds && given_ != nullptr) (*given_)[yaml] = ds;
    }
  }
  // A number field: nullopt when absent or "auto".
  absl::StatusOr<std::optional<double>> Number(const Json& parent, const char* key,
                                               const std::string& field) const {
    if (!parent.contains(key) || IsAuto(parent[key])) return std::optional<double>();
    const Json& v = parent[key];
    if (!v.is_number()) {
      return Bad(field, absl::StrCat("expected a number, got ",
                                     core::Excerpt(v.dump(-1, ' ', false, Json::error_handler_t::replace))));
    }
    Given(field);
    return std::optional<double>(v.get<double>());
  }
  absl::Status Number(const Json& parent, const char* key, const std::string& field, double* out) const {
    ZF_ASSIGN_OR_RETURN(const std::optional<double> v, Number(parent, key, field));
    if (v) *out = *v;
    return absl::OkStatus();
  }
  // An integer field, as an int64 (a double past 2^53 or with a fraction is refused, not cast).
  absl::Status Integer(const Json& parent, const char* key, const std::string& field,
                       std::optional<int64_t>* out) const {
    ZF_ASSIGN_OR_RETURN(const std::optional<double> v, Number(parent, key, field));
    if (!v) return absl::OkStatus();
    int64_t i = 0;
    if (!core::DoubleToInt64(*v, &i)) return Bad(field, absl::StrCat("expected an integer, got ", *v));
    *out = i;
    return absl::OkStatus();
  }

 private:
  const std::string& source_;
  std::map<std::string, std::string>* given_;
};

// The batch sizes and clipping; the global batch from train_batch_size or micro x accumulation x world.
absl::Status ParseDsBatch(const DsReader& ds, const Json& j, int world_size, TrainingSpec* out) {
  TrainingSpec& t = *out;
  std::optional<int64_t> train_batch;
  ZF_RETURN_IF_ERROR(
      ds.Integer(j, "train_micro_batch_size_per_gpu", "train_micro_batch_size_per_gpu", &t.micro_batch));
  ZF_RETURN_IF_ERROR(
      ds.Integer(j, "gradient_accumulation_steps", "gradient_accumulation_steps", &t.gradient_accumulation));
  ZF_RETURN_IF_ERROR(ds.Integer(j, "train_batch_size", "train_batch_size", &train_batch));
  ZF_RETURN_IF_ERROR(ds.Number(j, "gradient_clipping", "gradient_clipping", &t.max_grad_norm));
  if (train_batch) {
    t.global_batch = *train_batch;
  } else if (t.micro_batch && t.gradient_accumulation) {
    if (!core::CheckedProduct({*t.micro_batch, *t.gradient_accumulation, int64_t{world_size}},
                              &t.global_batch)) {
      return ds.Bad(
          "train_batch_size",
          absl::StrCat(
              "train_micro_batch_size_per_gpu x gradient_accumulation_steps x world size = ", *t.micro_batch,
              " x ", *t.gradient_accumulation, " x ", world_size, " overflows 64 bits"));
    }
    ds.Given("train_batch_size");  // as DeepSpeed derives it
  }
  return absl::OkStatus();
}

// zero_optimization: the stage (0-2) and whether the optimizer is offloaded to the CPU.
absl::Status ParseDsZero(const DsReader& ds, const Json& j, TrainingSpec* out) {
  if (!j.contains("zero_optimization")) return absl::OkStatus();
  TrainingSpec& t = *out;
  std::optional<int64_t> stage;
  const Json& z = j["zero_optimization"];
  if (!z.is_object()) return ds.Bad("zero_optimization", "expected an object");
  ZF_RETURN_IF_ERROR(ds.Integer(z, "stage", "zero_optimization.stage", &stage));
  if (stage && *stage != 0 && *stage != 1 && *stage != 2) {
    return ds.Bad("zero_optimization.stage", absl::StrCat("zerofit's workers run stages 0-2, got ", *stage));
  }
  if (stage) t.zero_stage = static_cast<int>(*stage);
  if (z.contains("offload_optimizer")) {
    const Json& o = z["offload_optimizer"];
    if (!o.is_object() || !o.contains("device") || !o["device"].is_string()) {
      return ds.Bad("zero_optimization.offload_optimizer.device", "expected \"cpu\" or \"none\"");
    }
    const std::string dev = o["device"].get<std::string>();
    if (dev != "cpu" && dev != "none") {
      return ds.Bad("zero_optimization.offload_optimizer.device",
                    absl::StrCat("expected cpu or none, got ", core::QuotedExcerpt(dev)));
    }
    t.offload = dev == "cpu";
    ds.Given("zero_optimization.offload_optimizer.device");
  }
  return absl::OkStatus();
}

// bf16 on or off; fp16 refused (the workers train bf16 or fp32).
absl::Status ParseDsPrecision(const DsReader& ds, const Json& j, TrainingSpec* out) {
  TrainingSpec& t = *out;
  if (j.contains("bf16")) {
    const Json& b = j["bf16"];
    const bool automatic = b.is_object() && b.contains("enabled") && IsAuto(b["enabled"]);
    if (!b.is_object() || (b.contains("enabled") && !b["enabled"].is_boolean() && !automatic)) {
      return ds.Bad("bf16.enabled", "expected true, false or \"auto\"");
    }
    if (!automatic) {
      t.bf16 = b.value("enabled", false);
      ds.Given("bf16.enabled");
    }
  }
  // value() throws when the stored type differs from the default's: every value() is preceded by a check.
  if (j.contains("fp16") && j["fp16"].is_object() && j["fp16"].contains("enabled")) {
    const Json& enabled = j["fp16"]["enabled"];
    if (IsAuto(enabled)) return absl::OkStatus();  // zerofit trains bf16 or fp32: never fp16
    if (!enabled.is_boolean()) return ds.Bad("fp16.enabled", "expected true, false or \"auto\"");
    if (enabled.get<bool>())
      return ds.Bad("fp16.enabled", "fp16 training is not supported by the workers; use bf16");
  }
  return absl::OkStatus();
}

// optimizer: AdamW (or Adam) and its rate and weight decay.
absl::Status ParseDsOptimizer(const DsReader& ds, const Json& j, TrainingSpec* out) {
  if (!j.contains("optimizer")) return absl::OkStatus();
  TrainingSpec& t = *out;
  const Json& o = j["optimizer"];
  if (!o.is_object()) return ds.Bad("optimizer", "expected an object");
  if (o.contains("type") && !o["type"].is_string()) return ds.Bad("optimizer.type", "expected \"AdamW\"");
  const std::string type = o.value("type", "AdamW");
  if (type != "AdamW" && type != "Adam")
    return ds.Bad("optimizer.type", absl::StrCat("only AdamW, got ", core::QuotedExcerpt(type)));
  // DeepSpeed's optimizer is fp32 AdamW: as with Hugging Face's Trainer, it stands for training.optim.
  if (o.contains("type")) ds.Given("optimizer.type");
  if (o.contains("params")) {
    ZF_RETURN_IF_ERROR(ds.Number(o["params"], "lr", "optimizer.params.lr", &t.lr));
    ZF_RETURN_IF_ERROR(
        ds.Number(o["params"], "weight_decay", "optimizer.params.weight_decay", &t.weight_decay));
  }
  return absl::OkStatus();
}

// scheduler: DeepSpeed's WarmupLR family as zerofit's linear warmup and constant, linear or cosine decay.
absl::Status ParseDsScheduler(const DsReader& ds, const Json& j, DeepSpeedTraining* out) {
  if (!j.contains("scheduler")) return absl::OkStatus();
  TrainingSpec& t = out->training;
  const Json& sc = j["scheduler"];
  if (!sc.is_object() || !sc.contains("type") || !sc["type"].is_string()) {
    return ds.Bad("scheduler.type", "expected WarmupLR, WarmupDecayLR or WarmupCosineLR");
  }
  const std::string type = sc["type"].get<std::string>();
  if (type != "WarmupLR" && type != "WarmupDecayLR" && type != "WarmupCosineLR") {
    return ds.Bad("scheduler.type", absl::StrCat("expected WarmupLR, WarmupDecayLR or WarmupCosineLR, got ",
                                                 core::QuotedExcerpt(type)));
  }
  const Json params = sc.contains("params") ? sc["params"] : Json::object();
  if (!params.is_object()) return ds.Bad("scheduler.params", "expected an object");
  // DeepSpeed's defaults, so that a config means what it means there; "auto" leaves the value to the
  // training section (FinishDeepSpeedTraining checks what depends on it).
  double min_lr = 0, min_ratio = 0, cos_min_ratio = 0.0001;
  std::optional<int64_t> warmup_given, total_given;
  const auto automatic = [&](const char* key) { return params.contains(key) && IsAuto(params[key]); };
  ZF_RETURN_IF_ERROR(
      ds.Integer(params, "warmup_num_steps", "scheduler.params.warmup_num_steps", &warmup_given));
  ZF_RETURN_IF_ERROR(ds.Integer(params, "total_num_steps", "scheduler.params.total_num_steps", &total_given));
  if (!automatic("warmup_num_steps")) {
    t.warmup_steps = warmup_given.value_or(1000);
    ds.Given("scheduler.params.warmup_num_steps");  // DeepSpeed's default counts as the config's
  }
  if (t.warmup_steps < 0) return ds.Bad("scheduler.params.warmup_num_steps", "must be >= 0");
  if (params.contains("warmup_type") && !params["warmup_type"].is_string()) {
    return ds.Bad("scheduler.params.warmup_type", "expected \"linear\"");
  }
  out->warmup_type = params.value("warmup_type", std::string("log"));
  ds.Given("scheduler.type");
  if (type == "WarmupLR" || type == "WarmupDecayLR") {
    ZF_RETURN_IF_ERROR(ds.Number(params, "warmup_min_lr", "scheduler.params.warmup_min_lr", &min_lr));
    ZF_ASSIGN_OR_RETURN(const std::optional<double> max_lr,
                        ds.Number(params, "warmup_max_lr", "scheduler.params.warmup_max_lr"));
    if (min_lr != 0) return ds.Bad("scheduler.params.warmup_min_lr", "zerofit warms up from 0; set 0");
    if (!automatic("warmup_max_lr")) {  // DeepSpeed's WarmupLR family sets the rate itself (default 0.001)
      t.lr = max_lr.value_or(0.001);
      if (!(t.lr > 0)) return ds.Bad("scheduler.params.warmup_max_lr", "must be positive");
      ds.Given("scheduler.params.warmup_max_lr");
    }
    t.lr_schedule = type == "WarmupLR" ? core::LrDecay::kConstant : core::LrDecay::kLinear;
  } else {  // WarmupCosineLR
    ZF_RETURN_IF_ERROR(
        ds.Number(params, "warmup_min_ratio", "scheduler.params.warmup_min_ratio", &min_ratio));
    ZF_RETURN_IF_ERROR(ds.Number(params, "cos_min_ratio", "scheduler.params.cos_min_ratio", &cos_min_ratio));
    if (min_ratio != 0) return ds.Bad("scheduler.params.warmup_min_ratio", "zerofit warms up from 0; set 0");
    if (!(cos_min_ratio >= 0 && cos_min_ratio <= 1)) {
      return ds.Bad("scheduler.params.cos_min_ratio", "must lie in [0, 1]");
    }
    t.lr_schedule = core::LrDecay::kCosine;
    out->cos_min_ratio = cos_min_ratio;
    ds.Given("scheduler.params.cos_min_ratio");
  }
  if (t.lr_schedule != core::LrDecay::kConstant && !automatic("total_num_steps")) {
    if (!total_given)
      return ds.Bad("scheduler.params.total_num_steps", "required (or \"auto\": the last step)");
    t.decay_steps = *total_given;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DeepSpeedTraining> ReadDeepSpeedConfig(const std::string& text, const std::string& source,
                                                      int world_size) {
  ZF_RETURN_IF_ERROR(core::CheckJsonDepth(text, core::kMaxJsonDepth, source));
  const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not a JSON object"));
  }
  DeepSpeedTraining d;
  d.source = source;
  const DsReader ds(d.source, &d.given);
  TrainingSpec& t = d.training;
  ZF_RETURN_IF_ERROR(ParseDsBatch(ds, j, world_size, &t));
  ZF_RETURN_IF_ERROR(ParseDsZero(ds, j, &t));
  ZF_RETURN_IF_ERROR(ParseDsPrecision(ds, j, &t));
  ZF_RETURN_IF_ERROR(ParseDsOptimizer(ds, j, &t));
  ZF_RETURN_IF_ERROR(ParseDsScheduler(ds, j, &d));
  if (j.contains("activation_checkpointing")) {
    t.checkpointing = true;
    ds.Given("activation_checkpointing");
  }
  return d;
}

absl::Status FinishDeepSpeedTraining(const DeepSpeedTraining& d, TrainingSpec* t) {
  const DsReader ds(d.source);
  if (d.cos_min_ratio) t->min_lr = *d.cos_min_ratio * t->lr;
  if (!d.warmup_type.empty() && t->warmup_steps > 0 && d.warmup_type != "linear") {
    return ds.Bad("scheduler.params.warmup_type",
                  absl::StrCat("zerofit warms up linearly; set \"linear\" (got \"",
                               core::Excerpt(d.warmup_type), "\", DeepSpeed's default is \"log\")"));
  }
  if (t->decay_steps > 0 && !(t->decay_steps > t->warmup_steps)) {
    return ds.Bad("scheduler.params.total_num_steps",
                  absl::StrCat("must exceed warmup_num_steps (", t->warmup_steps, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TrainingSpec> ParseDeepSpeedConfig(const std::string& text, const std::string& source,
                                                  int world_size) {
  ZF_ASSIGN_OR_RETURN(DeepSpeedTraining d, ReadDeepSpeedConfig(text, source, world_size));
  ZF_RETURN_IF_ERROR(FinishDeepSpeedTraining(d, &d.training));
  const DsReader ds(d.source);
  ZF_RETURN_IF_ERROR(ValidateTraining(
      d.training, world_size,
      [&](const std::string& field, const std::string& why) { return ds.Bad(DeepSpeedName(field), why); }));
  return d.training;
}

}  // namespace zerofit::jobspec
