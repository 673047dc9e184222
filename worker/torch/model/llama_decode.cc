// Incremental decoding of LlamaModel over a KvCache: the decoding members of LlamaAttentionImpl,
// LlamaDecoderLayerImpl and LlamaModelImpl (llama_model.h). The training forward (llama_model.cc) shares
// the modules and none of this code.
#include <algorithm>
#include <cmath>
#include <vector>

#include "worker/torch/model/attention_kernel.h"
#include "worker/torch/model/kv_cache.h"
#include "worker/torch/model/llama_model.h"

namespace zerofit::worker {
namespace {

// The keys a query may attend to: written (a non-negative position), not later than the query, and with
// `window` inside Mistral's sliding window. `q` and `k` are positions that broadcast against each other.
torch::Tensor AllowedKeys(const core::HfModelConfig& c, const torch::Tensor& q, const torch::Tensor& k,
                          bool window) {
  torch::Tensor allowed = k.ge(0).logical_and(k.le(q));
  if (window) allowed = allowed.logical_and(k.gt(q - *c.sliding_window));
  return allowed;
}

// [B, 1, t, S] bool, true where query i (slot start + i) may not attend to slot s: the key is padding
// (negative position), later than the query, or (Mistral) outside its sliding window. A query's own slot is
// never masked, so padding queries attend to themselves and stay finite. `longest`: max key position + 1.
torch::Tensor DecodeMask(const core::HfModelConfig& c, const torch::Tensor& query_positions,
                         const torch::Tensor& key_positions, int64_t start, int64_t longest) {
  const int64_t t = query_positions.size(1), s = key_positions.size(1);
  const torch::Tensor q = query_positions.unsqueeze(2);  // [B, t, 1]
  const torch::Tensor k = key_positions.unsqueeze(1);    // [B, 1, S]
  const bool window = c.sliding_window && *c.sliding_window < longest;
  // As MakeAttentionMask (llama_model.cc): only Mistral's window is implemented.
  TORCH_CHECK(!window || c.model_type == "mistral", "sequence length ", longest,
              " exceeds the sliding window (", c.sliding_window.value_or(0), ") of this ", c.model_type,
              " model; only Mistral's window is implemented");
  const torch::Tensor allowed = AllowedKeys(c, q, k, window);
  const torch::TensorOptions i64 = torch::TensorOptions().dtype(torch::kInt64).device(q.device());
  const torch::Tensor own = torch::arange(start, start + t, i64).unsqueeze(1).eq(torch::arange(s, i64));
  return allowed.logical_or(own.unsqueeze(0)).logical_not().unsqueeze(1);
}

// [B, 1, 1, capacity] bool for the fixed-shape step: DecodeMask's rule for one query per row at `slot`
// over every slot of the pass; a slot not yet written has position -1 and is masked like padding.
torch::Tensor StaticDecodeMask(const core::HfModelConfig& c, const torch::Tensor& query_positions,
                               const torch::Tensor& key_positions, const torch::Tensor& slot) {
  // A window that every position of the pass fits in masks nothing (StaticDecodeSupported refuses the
  // windows of other models that the pass exceeds).
  const torch::Tensor allowed = AllowedKeys(c, query_positions, key_positions,
                                            c.sliding_window.has_value() && c.model_type == "mistral");
  const torch::Tensor own =
      torch::arange(key_positions.size(1), key_positions.options()).eq(slot).unsqueeze(0);  // [1, S]
  return allowed.logical_or(own).logical_not().view({key_positions.size(0), 1, 1, key_positions.size(1)});
}

// The next token's fp32 logits from the last layer's output at one position per row, [B, H].
torch::Tensor NextTokenLogits(LlamaModelImpl& m, const torch::Tensor& x) {
  const torch::Tensor h = m.model->norm(x);
  const torch::Tensor logits = m.lm_head ? m.lm_head(h) : torch::linear(h, m.model->embed_tokens->weight);
  return logits.to(torch::kFloat32);
}

}  // namespace

torch::Tensor LlamaAttentionImpl::DecodeAt(const torch::Tensor& x, const torch::Tensor& cos,
                                           const torch::Tensor& sin, const torch::Tensor& masked,
                                           const torch::Tensor& slot, KvCache& cache, int64_t layer) {
  const int64_t b = x.size(0);
  auto [q, k, v] = RotatedQkv(x, cos, sin);
  std::pair<torch::Tensor, torch::Tensor> kv = cache.WriteAt(layer, slot, k, v);
  const double scale = std::pow(static_cast<double>(head_dim_), -0.5);
  const torch::Tensor out = GroupedDecodeAttention(q, kv.first, kv.second, masked, scale);
  return o_proj(out.reshape({b, 1, num_heads_ * head_dim_}));
}

torch::Tensor LlamaDecoderLayerImpl::DecodeAt(const torch::Tensor& x, const torch::Tensor& cos,
                                              const torch::Tensor& sin, const torch::Tensor& masked,
                                              const torch::Tensor& slot, KvCache& cache, int64_t layer) {
  torch::Tensor h = x + self_attn->DecodeAt(input_layernorm(x), cos, sin, masked, slot, cache, layer);
  return h + mlp(post_attention_layernorm(h));
}

torch::Tensor LlamaModelImpl::DecodeStepAt(const StaticDecodeInputs& in, KvCache& cache) {
  TORCH_CHECK(!score, "DecodeStepAt: this is a reward model (no lm_head)");
  TORCH_CHECK(in.ids.dim() == 2 && in.ids.size(1) == 1 && in.positions.sizes() == in.ids.sizes(),
              "DecodeStepAt: ids and positions must be [batch, 1], got ", in.ids.sizes(), " and ",
              in.positions.sizes());
  const torch::Tensor key_positions = cache.PositionsAt(in.slot, in.positions);
  const torch::Tensor masked = StaticDecodeMask(config_, in.positions, key_positions, in.slot);
  const torch::Tensor rows = in.positions.clamp_min(0).reshape({-1});
  const std::vector<int64_t> shape = {in.ids.size(0), 1, 1, head_dim_};
  const torch::Tensor cos = in.cos_table.index_select(0, rows).view(shape);
  const torch::Tensor sin = in.sin_table.index_select(0, rows).view(shape);
  torch::Tensor x = model->embed_tokens(in.ids);
  for (size_t l = 0; l < model->typed_layers.size(); ++l)
    x = model->typed_layers[l]->DecodeAt(x, cos, sin, masked, in.slot, cache, static_cast<int64_t>(l));
  return NextTokenLogits(*this, x.select(1, 0));
}

torch::Tensor LlamaAttentionImpl::Decode(const torch::Tensor& x, const torch::Tensor& cos,
                                         const torch::Tensor& sin, const torch::Tensor& masked,
                                         KvCache& cache, int64_t layer) {
  const int64_t b = x.size(0), t = x.size(1);
  auto [q, k, v] = RotatedQkv(x, cos, sin);
  std::pair<torch::Tensor, torch::Tensor> kv = cache.Append(layer, k, v);
  const double scale = std::pow(static_cast<double>(head_dim_), -0.5);
  torch::Tensor out = ManualAttentionMasked(q, kv.first, kv.second, masked, scale)
                          .transpose(1, 2)
                          .contiguous()
                          .reshape({b, t, num_heads_ * head_dim_});
  return o_proj(out);
}

torch::Tensor LlamaDecoderLayerImpl::Decode(const torch::Tensor& x, const torch::Tensor& cos,
                                            const torch::Tensor& sin, const torch::Tensor& masked,
                                            KvCache& cache, int64_t layer) {
  torch::Tensor h = x + self_attn->Decode(input_layernorm(x), cos, sin, masked, cache, layer);
  return h + mlp(post_attention_layernorm(h));
}

torch::Tensor LlamaModelImpl::DecodeStep(const torch::Tensor& input_ids, const torch::Tensor& positions,
                                         KvCache& cache) {
  TORCH_CHECK(!score, "DecodeStep: this is a reward model (no lm_head)");
  TORCH_CHECK(input_ids.dim() == 2 && input_ids.scalar_type() == torch::kInt64 && input_ids.size(1) > 0,
              "DecodeStep: input_ids must be [batch, t > 0] int64, got ", input_ids.sizes(), " ",
              input_ids.scalar_type());
  TORCH_CHECK(positions.sizes() == input_ids.sizes() && positions.scalar_type() == torch::kInt64,
              "DecodeStep: positions must be int64 shaped like input_ids ", input_ids.sizes(), ", got ",
              positions.sizes());
  const torch::Tensor& embedding = model->embed_tokens->weight;
  const torch::Device device = embedding.device();
  const torch::Tensor pos = positions.to(device);
  const int64_t start = cache.length();
  const torch::Tensor key_positions = cache.PositionsForStep(pos);
  // Positions 0..longest-1 are in use (one host read per step); padding's own rows read position 0's angles.
  const int64_t longest = std::max<int64_t>(key_positions.max().item<int64_t>() + 1, 1);
  const torch::Tensor masked = DecodeMask(config_, pos, key_positions, start, longest);
  std::pair<torch::Tensor, torch::Tensor> rotary = RotaryCosSin(config_, longest, device);
  const torch::Tensor rows = pos.clamp_min(0).reshape({-1});
  const std::vector<int64_t> shape = {pos.size(0), 1, pos.size(1), head_dim_};
  // The activation dtype is the weights' (a test may convert the whole model to float64).
  const torch::Tensor cos = rotary.first.index_select(0, rows).to(embedding.scalar_type()).view(shape);
  const torch::Tensor sin = rotary.second.index_select(0, rows).to(embedding.scalar_type()).view(shape);
  torch::Tensor x = model->embed_tokens(input_ids.to(device));
  for (size_t l = 0; l < model->typed_layers.size(); ++l)
    x = model->typed_layers[l]->Decode(x, cos, sin, masked, cache, static_cast<int64_t>(l));
  cache.Advance(input_ids.size(1));
  return NextTokenLogits(*this, x.select(1, x.size(1) - 1));
}

}  // namespace zerofit::worker
