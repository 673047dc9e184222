// The frozen reference policy of DPO, in one of three strategies (what it costs is in docs/planning terms):
//   resident:    a second model kept next to the policy; one extra forward per micro-batch, full parameter
//                memory on the device all the time.
//   offloaded:   the reference weights live in pinned host memory; before each reference forward they are
//                copied to the device and dropped right after, so they occupy device memory only during that
//                forward (copy cost per micro-batch). In CPU-only builds the "device" copy is a host copy.
//   precomputed: a pre-pass computes the reference log-probabilities of every training pair once (sharded
//                across ranks, then summed with one all-reduce); the model is freed before training starts.
//   lora-base:   LoRA runs only: the policy itself with its adapters disabled (AdaptersOff), whose frozen
//                base is the initial policy (the adapters start at B = 0); no second copy of the weights,
//                as TRL's DPOTrainer and GRPOTrainer do with a PEFT model.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "device/buffer.h"
#include "worker/data/preference_dataset.h"
#include "worker/torch/model/llama_model.h"

namespace zerofit::worker {

enum class ReferenceStrategy { kResident, kOffloaded, kPrecomputed, kLoraBase };
absl::StatusOr<ReferenceStrategy> ParseReferenceStrategy(const std::string& name);
const char* ReferenceStrategyName(ReferenceStrategy s);
// Whether a policy built with `lora` can serve as reference `s`: lora-base needs adapters to disable. The DPO
// and GRPO sessions both ask.
absl::Status CheckReferenceStrategy(ReferenceStrategy s, const LoraConfig& lora);

class ReferenceModel {
 public:
  // Takes ownership of `model` (a copy of the initial policy; its parameters are frozen here). kLoraBase:
  // `model` is the policy itself (the handle is shared; nothing of it is frozen or moved), which must have
  // LoRA adapters.
  static absl::StatusOr<std::unique_ptr<ReferenceModel>> Create(LlamaModel model, ReferenceStrategy strategy);

  // kPrecomputed: computes chosen/rejected response log-probs of every pair (rank r takes pairs i with
  // i % world == r, in micro-batches of `batch_pairs`), shares them with one all-reduce and frees the model.
  absl::Status Precompute(const std::vector<data::PreferencePair>& pairs, int32_t pad_id, int64_t batch_pairs,
                          comm::Communicator* comm);

  // Response log-probs [2B] of a PairBatch's rows (chosen rows then rejected rows); `pair_ids` are the
  // batch's pair indices into the training set (used by kPrecomputed); `head_from` the batch's
  // PairTensors::head_from (the head skips the positions before it).
  absl::StatusOr<torch::Tensor> ResponseLogProbs(const torch::Tensor& tokens,
                                                 const torch::Tensor& response_start,
                                                 const torch::Tensor& lengths,
                                                 const std::vector<uint64_t>& pair_ids,
                                                 int64_t head_from = 0);

  ReferenceStrategy strategy() const { return strategy_; }
  // Reference parameter bytes resident on the compute device between calls.
  size_t device_bytes() const;
  size_t pinned_bytes() const { return pinned_.pinned_bytes(); }
  // kOffloaded: host bytes holding the weights (pinned or not).
  size_t host_bytes() const { return pinned_.bytes(); }

 private:
  ReferenceModel(LlamaModel model, ReferenceStrategy strategy)
      : model_(std::move(model)), strategy_(strategy) {}
  torch::Tensor Forward(const torch::Tensor& tokens, const torch::Tensor& response_start,
                        const torch::Tensor& lengths, int64_t head_from);

  LlamaModel model_;
  ReferenceStrategy strategy_;
  device::Buffer pinned_;                   // kOffloaded: every parameter, back to back (pinned host)
  std::vector<torch::Tensor> host_params_;  // kOffloaded: views into pinned_
  std::vector<float> table_;                // kPrecomputed: [2 * pairs]: chosen, rejected per pair
  bool precomputed_ = false;
};

}  // namespace zerofit::worker
