// What every training session starts from and shares (preference_session.h, grpo_session.h): the seeded
// model, the
// --init weights loaded into it, and its binding to the ZeRO-2 engine. Same calls for every task, so a
// reward model, a DPO policy and a GRPO policy are built and sharded alike.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "core/hf_config.h"
#include "core/safetensors.h"
#include "jobspec/step_scheduler.h"
#include "worker/torch/model/llama_model.h"
#include "worker/torch/train/preference_session.h"
#include "worker/torch/train/runtime_options.h"
#include "worker/torch/train/training_backend.h"
#include "worker/torch/train/zero2_binding.h"

namespace zerofit::worker {

// The session's device, LibTorch device and gradient communicator: the plan's device choice on runtime's
// GPU, device communicator and NCCL factory (training_backend.h).
absl::StatusOr<TrainingBackend> SessionBackend(const PreferenceTrainOptions& o, const RuntimeOptions& runtime,
                                               comm::Communicator* comm);

// The model of `o.task` (a score head for reward models) seeded with o.seed, so every rank starts from the
// same weights, then `weights` when given, on `device`, with runtime's attention kernel.
absl::StatusOr<LlamaModel> InitialModel(const core::HfModelConfig& config, const PreferenceTrainOptions& o,
                                        const RuntimeOptions& runtime,
                                        const std::optional<core::SafetensorsModel>& weights,
                                        const torch::Device& device);

// `o.model_dir`'s config.json; an error names the spec's field (`model`) and the file.
absl::StatusOr<core::HfModelConfig> LoadModelConfig(const PreferenceTrainOptions& o);

// `o.init_weights` opened and validated once (nullopt when empty); an error names the spec's field (`init`,
// or `model` for the model directory's own weights) and the file.
absl::StatusOr<std::optional<core::SafetensorsModel>> OpenInitWeights(const PreferenceTrainOptions& o);

// ZeRO-2 over `policy`'s trainable parameters (LoRA adapters and the score head only, when LoRA is on); no
// weight decay for norms and biases. The plan's optimizer and offload, runtime's buckets and threads. With
// offload, rank 0 says on stderr how many threads CPU AdamW got, and any rank with fewer CPUs than threads
// says so.
// `micro_batches_per_step`: sharding::Zero2Options's (0 where it varies: GRPO's rollouts).
absl::StatusOr<std::unique_ptr<Zero2Binding>> BindPolicy(LlamaModel& policy, const PreferenceTrainOptions& o,
                                                         const RuntimeOptions& runtime,
                                                         const TrainingBackend& backend,
                                                         comm::Communicator* comm,
                                                         int micro_batches_per_step);

// A checkpoint of `binding`'s optimizer under `root` (sharding/checkpoint.h), keeping the `keep` newest; the
// stale folders of a killed earlier save that rank 0 removed are said on stderr. Collective.
absl::Status SaveSessionCheckpoint(Zero2Binding& binding, const std::string& root, const std::string& extra,
                                   int keep);

// Rank 0 writes `policy` in Hugging Face format into `dir` once the optimizer's pending updates are in (LoRA
// merged), with the tokenizer's files and generation_config.json of the directories `o` trained from
// (data/companion_files.h), as data.eos_token and data.chat_template changed it; the other ranks return at
// once.
absl::Status ExportPolicy(int rank, Zero2Binding& binding, const LlamaModel& policy,
                          const core::HfModelConfig& config, const PreferenceTrainOptions& o,
                          const std::string& dir);

// The coordinator's step scheduler (jobspec/step_scheduler.h) with the coordinator's options, for a run
// without one: a job run locally and the same job run through `zerofit run` train on the same samples, step
// for step.
absl::StatusOr<jobspec::StepScheduler> LocalScheduler(const PreferenceTrainOptions& o, int world_size,
                                                      std::vector<int64_t> lengths);

// Why a step failed: a CUDA or CPU allocator out-of-memory is ResourceExhausted (the coordinator re-plans),
// anything else Internal.
absl::Status StepFailure(int64_t step, const std::exception& e);

}  // namespace zerofit::worker
