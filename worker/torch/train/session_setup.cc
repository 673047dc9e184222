#include "worker/torch/train/session_setup.h"

#include <cstdio>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/cpu_affinity.h"
#include "core/status_macros.h"
#include "sharding/checkpoint.h"
#include "worker/data/companion_files.h"

namespace zerofit::worker {

// Why a step failed: a CUDA or CPU allocator out-of-memory is ResourceExhausted (the coordinator re-plans).
absl::Status StepFailure(int64_t step, const std::exception& e) {
  const bool oom = dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr;
  const std::string what = absl::StrCat("training step ", step, " failed: ", e.what());
  return oom ? absl::ResourceExhaustedError(what) : absl::InternalError(what);
}

namespace {

// With offload: rank 0 says how many threads CPU AdamW got, and any rank whose launcher gave it fewer CPUs
// than threads says so (those threads would share the CPUs: one thread's speed, issue 30).
void ReportOffloadThreads(int offload_threads, int rank) {
  const int cpus = core::AllowedCpus();
  const int threads = core::ThreadsOrAllowedCpus(offload_threads);
  if (rank == 0) {
    std::fprintf(stderr, "offload: CPU AdamW on %d thread(s); rank 0 may run on %d CPU(s)\n", threads, cpus);
  }
  const absl::Status fit = core::CheckThreadsFitCpus("optimizer offload", threads, cpus);
  if (!fit.ok()) std::fprintf(stderr, "warning: rank %d: %s\n", rank, std::string(fit.message()).c_str());
}

}  // namespace

absl::StatusOr<TrainingBackend> SessionBackend(const PreferenceTrainOptions& o, const RuntimeOptions& runtime,
                                               comm::Communicator* comm) {
  return MakeTrainingBackend(o.device, runtime.local_rank, comm, runtime.nccl, runtime.device_comm);
}

absl::StatusOr<LlamaModel> InitialModel(const core::HfModelConfig& config, const PreferenceTrainOptions& o,
                                        const RuntimeOptions& runtime,
                                        const std::optional<core::SafetensorsModel>& weights,
                                        const torch::Device& device) {
  torch::manual_seed(static_cast<uint64_t>(o.seed));  // same initial weights on every rank
  LlamaOptions mo = o.model;
  mo.attention = runtime.attention;
  mo.fused_kernels = runtime.fused_kernels;
  mo.reward_head = o.task == PreferenceTrainOptions::Task::kReward;
  LlamaModel m(config, mo);
  if (weights) ZF_RETURN_IF_ERROR(m->LoadWeights(*weights));
  m->to(device);
  return m;
}

absl::StatusOr<core::HfModelConfig> LoadModelConfig(const PreferenceTrainOptions& o) {
  absl::StatusOr<core::HfModelConfig> config = core::LoadHfConfig(o.model_dir + "/config.json");
  if (config.ok()) return config;
  return absl::Status(config.status().code(),
                      absl::StrCat("field 'model' (the model's config.json): ", config.status().message()));
}

absl::StatusOr<std::optional<core::SafetensorsModel>> OpenInitWeights(const PreferenceTrainOptions& o) {
  if (o.init_weights.empty()) return std::nullopt;
  absl::StatusOr<core::SafetensorsModel> weights = core::SafetensorsModel::Open(o.init_weights);
  if (!weights.ok()) {
    // The job spec's field that named them: `init`, or `model` for the model directory's own weights.
    const char* field = o.init_weights == o.model_dir ? "model" : "init";
    return absl::Status(
        weights.status().code(),
        absl::StrCat("field '", field, "' (the initial weights): ", weights.status().message()));
  }
  return std::optional<core::SafetensorsModel>(*std::move(weights));
}

absl::StatusOr<std::unique_ptr<Zero2Binding>> BindPolicy(LlamaModel& policy, const PreferenceTrainOptions& o,
                                                         const RuntimeOptions& runtime,
                                                         const TrainingBackend& backend,
                                                         comm::Communicator* comm,
                                                         int micro_batches_per_step) {
  sharding::Zero2Options zo;
  zo.micro_batches_per_step = micro_batches_per_step;
  zo.bucket_bytes = runtime.bucket_bytes;
  zo.accumulation_mode = runtime.accumulation_mode;
  zo.adamw.weight_decay = o.weight_decay;
  zo.max_grad_norm = o.max_grad_norm;
  zo.offload.enabled = o.offload;
  zo.offload.threads = runtime.offload_threads;
  zo.offload.delayed_update_from = o.offload ? o.delayed_update_from : -1;
  zo.moments = o.moments;
  zo.param_dtype = o.model.dtype == torch::kBFloat16  ? core::DType::kBFloat16
                   : o.model.dtype == torch::kFloat16 ? core::DType::kFloat16
                                                      : core::DType::kFloat32;
  ZF_ASSIGN_OR_RETURN(std::unique_ptr<Zero2Binding> binding,
                      Zero2Binding::Bind(
                          *policy, zo, backend.data(),
                          [](const std::string& name, const torch::Tensor& p) {
                            return p.dim() >= 2;  // no decay for norms, biases
                          },
                          sharding::Zero2Devices{backend.device.get(), comm}));
  if (o.offload) ReportOffloadThreads(runtime.offload_threads, comm->rank());
  return binding;
}

absl::Status SaveSessionCheckpoint(Zero2Binding& binding, const std::string& root, const std::string& extra,
                                   int keep) {
  ZF_ASSIGN_OR_RETURN(const sharding::CheckpointInfo info,
                      sharding::SaveCheckpoint(binding.optimizer(), root, extra, keep));
  // Said where the job's output goes (mpiexec forwards the ranks' stderr); only rank 0 removes any.
  for (const std::string& dir : info.removed_stale) {
    std::fprintf(stderr,
                 "checkpoint: removed %s, left by an earlier save of this job that was killed or failed\n",
                 dir.c_str());
  }
  return absl::OkStatus();
}

absl::Status ExportPolicy(int rank, Zero2Binding& binding, const LlamaModel& policy,
                          const core::HfModelConfig& config, const PreferenceTrainOptions& o,
                          const std::string& dir) {
  if (rank != 0) return absl::OkStatus();
  ZF_RETURN_IF_ERROR(binding.optimizer().Flush());
  try {
    ZF_RETURN_IF_ERROR(policy->ExportHf(dir, config));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("export failed: ", e.what()));
  }
  return data::WriteCompanionFiles(o.model_dir, o.data.tokenizer_dir, dir, o.data.tokenizer_overrides);
}

absl::StatusOr<jobspec::StepScheduler> LocalScheduler(const PreferenceTrainOptions& o, int world_size,
                                                      std::vector<int64_t> lengths) {
  jobspec::SchedulerOptions schedule;
  schedule.global_batch = o.global_batch;
  schedule.world_size = world_size;
  schedule.gradient_accumulation = o.gradient_accumulation;
  schedule.seed = o.seed;
  return jobspec::StepScheduler::Create(std::move(lengths), schedule);
}

}  // namespace zerofit::worker
