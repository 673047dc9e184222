// A padded batch of preference pairs (data::PairBatch) as LibTorch tensors, and the strided split of a pair
// set across ranks used by evaluation and by the reference pre-pass.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/hf_config.h"
#include "worker/data/pair_batch.h"
#include "worker/data/preference_dataset.h"

namespace zerofit::worker {

struct PairTensors {
  // [R, T], [R], [R] int64: the chosen rows, then the rejected rows (R = 2B; SFT: the chosen rows, R = B).
  torch::Tensor tokens, starts, lengths;
  std::vector<uint64_t> pair_ids;  // the B pair indices, in row order
  // The first position whose next-token log-probability a loss reads: min over rows of starts - 1 (known on
  // the host, so no device read): TokenLogProbs(tokens, head_from) skips the prompts' common prefix.
  int64_t head_from = 0;
  // A reward model's batch: [2B] int64, the position each row's score is read from (reward_readout.h),
  // found and checked on the host where the batch is built, so that the forward reads nothing back from the
  // device (LlamaModelImpl::ScoresAt). Undefined for the other tasks.
  torch::Tensor readout;
  // A reward model's batch whose pairs carry margins (PreferencePair::margin, not all 0): [B] float32, the
  // required score gap of each pair. Undefined otherwise (BradleyTerryLoss then uses none).
  torch::Tensor margins;
  // An SFT batch whose examples score only some of their completion's tokens (assistant_only_loss,
  // PairBatch::scored): [R, T] bool, true at each scored position. Undefined otherwise: the losses score
  // positions [starts, lengths).
  torch::Tensor scored;
  // The chosen rows' scored tokens, counted on the host (PairBatch::scored_tokens; no device read): SFT's
  // loss units, DPO's negative log-likelihood's.
  int64_t scored_tokens = 0;
};

// The id batches for a model with `config` are padded with: pad_token_id when set (a reward model's score is
// read at the last token that is not pad_token_id, reward_readout.h, so padding must be exactly that id),
// else eos_token_id, else 0. Without pad_token_id the id is arbitrary: attention is causal and every loss
// reads positions below the row's length.
int32_t BatchPadId(const core::HfModelConfig& config);

// How a model's batches are built: the pad id, the rows (SFT: the chosen ones alone), and for a reward
// model its score read-out rule.
struct BatchFormat {
  int32_t pad_id = 0;
  data::PairRows rows = data::PairRows::kChosenAndRejected;
  bool reward_readout = false;
  std::optional<int64_t> readout_pad_token;  // config.pad_token_id (RewardReadoutPositions' pad_token_id)
};
BatchFormat BatchFormatOf(const core::HfModelConfig& config, bool reward_model);

// The pairs `ids` as one padded batch on the host. With format.reward_readout, also `readout`; a batch the
// read-out rule refuses (padding that is not the pad id, a row of pad ids only) is InvalidArgument naming its
// pairs.
absl::StatusOr<PairTensors> MakePairTensors(const std::vector<data::PreferencePair>& pairs,
                                            const std::vector<uint64_t>& ids, const BatchFormat& format);

// Rank `rank`'s share of pairs [0, n) (every world-th pair, starting at rank), in chunks of at most `chunk`.
std::vector<std::vector<uint64_t>> StridedChunks(uint64_t n, int rank, int world, uint64_t chunk);

}  // namespace zerofit::worker
