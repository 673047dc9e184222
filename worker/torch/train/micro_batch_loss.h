// What the preference trainer computes on the device for one micro-batch and for its share of the held-out
// set, apart from the ZeRO-2 engine and the communicator: forward, loss and metrics. PreferenceSession
// (preference_session.h) runs these; tests/worker/torch/device_clean_test.cc runs the same functions with
// the models on the meta device to show that nothing in them mixes host and device tensors.
//
// Host reads: none here (a reward batch brings its read-out positions from the host: PairTensors::readout).
// Metrics stay on the device as a metrics tensor (objectives.h) until the caller reads them once per step or
// evaluation (ReadPairMetrics).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/data/preference_dataset.h"
#include "worker/torch/model/llama_model.h"
#include "worker/torch/train/objectives.h"
#include "worker/torch/train/pair_tensors.h"
#include "worker/torch/train/preference_session.h"
#include "worker/torch/train/reference_model.h"

namespace zerofit::worker {

// `b` with tokens, starts, lengths and a reward batch's readout on `device` (pair_ids stay on the host; a
// no-op on the CPU), each by HostToDevice: no wait for the device's queue.
PairTensors OnDevice(PairTensors b, const torch::Device& device);

// Loss (sum over the micro-batch's pairs) and metrics of one micro-batch on `b`'s device (the policy's):
// reward: Bradley-Terry on the scores; DPO: against `reference` (required then); SFT: NLL of the chosen
// responses. The metrics include sequence_tokens (every token forwarded). Throws c10::Error on a failing
// forward; a reference error, or a reward batch without its readout, is returned.
absl::StatusOr<LossOutput> MicroBatchLoss(LlamaModel& policy, ReferenceModel* reference,
                                          const PreferenceTrainOptions& options, const PairTensors& b);

// Metrics of `pairs`' entries `chunks` (each chunk one batch) under no-grad, summed on `device`: this rank's
// share of a held-out evaluation, not yet read to the host nor summed over ranks.
absl::StatusOr<torch::Tensor> EvaluateChunks(LlamaModel& policy, ReferenceModel* reference,
                                             const std::vector<data::PreferencePair>& pairs,
                                             const std::vector<std::vector<uint64_t>>& chunks,
                                             const BatchFormat& format, const PreferenceTrainOptions& options,
                                             const torch::Device& device);

}  // namespace zerofit::worker
