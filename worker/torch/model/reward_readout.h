// Which position of a padded row a reward model reads its score from: the rule of transformers'
// *ForSequenceClassification heads, so that a model zerofit trains scores the same sequences the same way
// after export (LlamaForSequenceClassification, MistralFor..., Qwen2For...).
//
// zerofit follows current transformers (GenericForSequenceClassification.forward, since
// huggingface/transformers#35911, early 2025): with a `pad_token_id` in config.json the score is read at the
// rightmost token that is not pad_token_id, for left and right padding alike; without one, at the last
// position, and transformers refuses batches of more than one row. Older releases read one position before
// the first pad token (`eq(input_ids, pad).argmax(-1) - 1`, modulo the row length): the same position as long
// as the pad id does not occur inside a sequence.
//
// Consequences for the usual setups (zerofit right-pads; a row is BOS prompt response EOS, then padding):
//  - pad != eos: the score is read at the EOS token (position length - 1).
//  - pad == eos: the EOS that ends the response is indistinguishable from padding, so transformers reads
//    the last response token before it (and before any run of EOS tokens ending the sequence); zerofit
//    trains on exactly that token rather than on the EOS.
//  - no pad_token_id: the last real token (length - 1), which is what transformers reads for one unpadded
//    sequence; score batches there only after setting pad_token_id before training.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>

namespace zerofit::worker {

// Positions [B] int64 (on input_ids' device) the score of each row of `input_ids` [B, T] is read from.
// `lengths` [B] int64, each in [1, T]: tokens at and after lengths[b] are padding. With a pad id, that
// padding must be the pad id (otherwise transformers would read a padding token), and every row needs a token
// other than the pad id before lengths[b]; throws c10::Error naming the row otherwise (lengths outside [1, T]
// too). Reads one value to the host for these checks: one synchronisation per call on a GPU.
torch::Tensor RewardReadoutPositions(const torch::Tensor& input_ids, const torch::Tensor& lengths,
                                     std::optional<int64_t> pad_token_id);

}  // namespace zerofit::worker
