#include "worker/torch/model/reward_readout.h"

namespace zerofit::worker {
namespace {

// The first row where `bad` [B] is true, for error messages (-1 if none).
int64_t FirstTrue(const torch::Tensor& bad) {
  const torch::Tensor rows = bad.nonzero();
  return rows.size(0) > 0 ? rows[0][0].item<int64_t>() : -1;
}

}  // namespace

torch::Tensor RewardReadoutPositions(const torch::Tensor& input_ids, const torch::Tensor& lengths,
                                     std::optional<int64_t> pad_token_id) {
  TORCH_CHECK(input_ids.dim() == 2, "input_ids must be [batch, seq]");
  const int64_t b = input_ids.size(0), t = input_ids.size(1);
  TORCH_CHECK(lengths.dim() == 1 && lengths.size(0) == b && lengths.scalar_type() == torch::kInt64,
              "lengths must be [batch] int64, got ", lengths.sizes(), " ", lengths.scalar_type());
  const torch::Tensor len = lengths.to(input_ids.device());
  const torch::Tensor bad_length = (len < 1) | (len > t);
  // Without a pad id transformers reads position -1 of an unpadded row: its last real token.
  if (!pad_token_id) {
    TORCH_CHECK(!bad_length.any().cpu().item<bool>(), "lengths must lie in [1, ", t, "]; row ",
                FirstTrue(bad_length), " does not");
    return len - 1;
  }
  const torch::Tensor pos = torch::arange(t, input_ids.options().dtype(torch::kInt64)).unsqueeze(0);
  const torch::Tensor inside = pos < len.unsqueeze(1);
  const torch::Tensor not_pad = input_ids != *pad_token_id;
  const torch::Tensor stray = (not_pad & ~inside).any(1), empty = ~not_pad.any(1);
  // One host read (a synchronisation on a GPU) for every check; the rows are looked up only on failure.
  const torch::Tensor failed = torch::stack({bad_length.any(), stray.any(), empty.any()}).cpu();
  TORCH_CHECK(!failed[0].item<bool>(), "lengths must lie in [1, ", t, "]; row ", FirstTrue(bad_length),
              " does not");
  TORCH_CHECK(!failed[1].item<bool>(), "row ", FirstTrue(stray),
              " is padded with a token other than pad_token_id ", *pad_token_id,
              ": transformers would read its score from the padding");
  TORCH_CHECK(!failed[2].item<bool>(), "row ", FirstTrue(empty), " has no token other than pad_token_id ",
              *pad_token_id, ": there is no token to read a reward score from");
  // The rightmost non-pad position; unique because every row has one (argmax ties only among zeros).
  return (pos * not_pad.to(torch::kInt64)).argmax(1);
}

}  // namespace zerofit::worker
