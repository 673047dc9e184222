#include "worker/torch/train/plan_options.h"

#include <filesystem>

#include "core/status_macros.h"

namespace zerofit::worker {

data::DataSource DataSourceOf(const jobspec::JobPlan& plan) {
  const jobspec::DataSpec& d = plan.data;
  data::DataSource s;
  if (!d.dir.empty()) {
    s = data::DataSourceOfDirectory(d.dir);
  } else {
    s.train = d.train;
    s.test = d.test;
    s.tokenizer_dir = d.tokenizer.empty() ? data::TokenizerDirOf(plan.model) : d.tokenizer;
    s.max_prompt_length = d.max_prompt_length;
  }
  if (!plan.eval.data.empty()) s.test = plan.eval.data;
  return s;
}

absl::StatusOr<PreferenceTrainOptions> OptionsFromPlan(const jobspec::JobPlan& plan) {
  namespace fs = std::filesystem;
  PreferenceTrainOptions o;
  ZF_ASSIGN_OR_RETURN(o.task, ParseTask(plan.task));
  o.model_dir = plan.model;
  if (fs::exists(fs::path(plan.model) / "model.safetensors") ||
      fs::exists(fs::path(plan.model) / "model.safetensors.index.json")) {
    o.init_weights = plan.model;
  }
  o.data = DataSourceOf(plan);
  ZF_ASSIGN_OR_RETURN(o.data.add_bos, data::ParseAddBos(plan.data.add_bos, "data.add_bos"));
  o.eval_every = plan.eval.every;
  o.eval_max_samples = plan.eval.max_samples;
  o.steps = plan.steps;
  o.global_batch = plan.global_batch;
  o.micro_batches = plan.micro_batches;
  o.schedule = plan.schedule;
  o.weight_decay = static_cast<float>(plan.weight_decay);
  o.max_grad_norm = static_cast<float>(plan.max_grad_norm);
  o.offload.enabled = plan.offload;
  o.model.activation_checkpointing = plan.activation_checkpointing;
  o.model.dtype = plan.bf16 ? torch::kBFloat16 : torch::kFloat32;
  o.max_length = plan.max_length;
  o.export_dir = plan.export_dir;
  ZF_ASSIGN_OR_RETURN(o.device, device::ParseDeviceChoice(plan.device));
  return o;
}

}  // namespace zerofit::worker
