// The decoder of the Llama family (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM and their
// *ForSequenceClassification reward heads), computing exactly what Hugging Face transformers computes (eager
// attention; with LlamaOptions.attention at SDPA, what its "sdpa" attention computes), with optional LoRA
// adapters and per-layer activation checkpointing.
//
// Architecture: token embedding; per layer x += o_proj(attn(input_layernorm(x))), x += mlp(
// post_attention_layernorm(x)); final RMSNorm; untied or tied lm_head, or a bias-free score head.
//  - RMSNorm: in fp32, x * rsqrt(mean(x^2) + eps), cast back to the input dtype, then times weight.
//  - Rotary embeddings, HF's rotate_half convention (first half/second half, not interleaved), inv_freq and
//    cos/sin in fp32 then cast to the activation dtype; rope_scaling "linear" (inv_freq / factor), "dynamic"
//    (NTK: theta rescaled when the sequence is longer than max_position_embeddings) and "llama3"
//    (frequency-band interpolation of transformers' _compute_llama3_parameters).
//  - Grouped-query attention: kv head g serves query heads [g * n_rep, (g + 1) * n_rep). Scores
//    q k^T / sqrt(head_dim) in the activation dtype, causal softmax in fp32 cast back (the manual kernel;
//    SDPA's fused kernels keep scores in fp32 and round elsewhere, attention_kernel.h). Mistral with a
//    sliding_window shorter than the sequence also masks keys j <= i - sliding_window, as HF does; a Qwen2
//    sliding window (layer-dependent in HF) is refused for sequences longer than the window.
//  - Biases: q/k/v carry one when attention_bias (Qwen2); o_proj only for model_type "llama" with
//    attention_bias (LlamaAttention uses the flag for all four, Qwen2 and Mistral never bias o_proj).
//  - MLP: down_proj(silu(gate_proj(x)) * up_proj(x)).
// Positions are 0..T-1 for every row: sequences are right-padded. Attention is causal, so position t only
// ever sees tokens <= t and padding after a sequence never influences its real positions: no padding mask is
// needed, the caller just ignores outputs at padding positions (Scores reads a real position, see below).
//
// Parameter names equal Hugging Face's (named_parameters(): "model.embed_tokens.weight",
// "model.layers.0.self_attn.q_proj.weight", ..., "model.norm.weight", "lm_head.weight" unless tied,
// "score.weight" for a reward head, which replaces lm_head). LoRA adds "<linear>.lora_A"/"<linear>.lora_B";
// with LoRA on, only those and score.weight require grad.
//
// Forward methods throw c10::Error on bad input (LibTorch's convention inside modules); LoadWeights and
// ExportHf return Status. Not thread-safe: one forward/backward at a time.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/hf_config.h"
#include "core/safetensors.h"
#include "worker/torch/model/attention_kernel.h"
#include "worker/torch/model/fused_kernels.h"
#include "worker/torch/model/kv_cache.h"
#include "worker/torch/model/lora.h"

namespace zerofit::worker {

struct LlamaOptions {
  bool activation_checkpointing = false;  // recompute each decoder layer in backward
  // RMSNorm and SwiGLU's gating keep only their inputs for backward (RecomputedCall, SwiGlu) where no layer
  // is checkpointed; false: the plain autograd graphs, the same gradients up to the order in which fp32
  // contributions to a norm's input are summed (what a checkpointed layer recomputes; tests compare with it).
  bool lean_pieces = true;
  // Where RMSNorm and SwiGLU's gating run as fused kernels (fused_kernels.h): on CUDA tensors by default,
  // checkpointed or not (their reductions run in a fixed order, so a recomputation gives the same bits).
  FusedKernels fused_kernels = FusedKernels::kCuda;
  LoraConfig lora;
  bool reward_head = false;  // score head (Linear(hidden, num_labels, bias=false)) instead of lm_head
  torch::Dtype dtype = torch::kFloat32;  // parameters and activations: kFloat32, kBFloat16 or kFloat16
  double initializer_range = 0.02;       // N(0, std) init of linear and embedding weights, as HF
  // The attention kernel (attention_kernel.h): kAuto runs SDPA on LibTorch 2.1+ and the manual kernel on
  // 1.13; kSdpa on a LibTorch without it is an error naming this field.
  AttentionKernel attention = AttentionKernel::kAuto;
  // Rows (predicted tokens) per chunk of TokenLogProbs' head; 0: DefaultLogProbChunkRows(vocab_size).
  int64_t log_prob_chunk_rows = 0;
};

// Checks that `config` describes a model this implementation computes exactly and that `options` are
// valid; the error names the field.
absl::Status ValidateLlamaConfig(const core::HfModelConfig& config, const LlamaOptions& options);

// Rotary embedding tables for positions 0..seq_len-1: cos and sin, [seq_len, head_dim], fp32.
std::pair<torch::Tensor, torch::Tensor> RotaryCosSin(const core::HfModelConfig& config, int64_t seq_len,
                                                     torch::Device device);
// Hugging Face's rotate_half: [x1, x2] -> [-x2, x1] over the last dimension's halves.
torch::Tensor RotateHalf(const torch::Tensor& x);

// Hugging Face's LlamaRMSNorm. Where `fused` takes the input, one fused kernel each way (FusedRmsNorm).
// Otherwise `recomputed`: in a graph that needs gradients, autograd keeps the input rather than the fp32
// arithmetic (RecomputedCall); the model turns it off inside checkpointed layers, whose plain graph lives for
// one layer's backward only.
class RmsNormImpl : public torch::nn::Module {
 public:
  RmsNormImpl(int64_t dim, double eps, bool recomputed = true, FusedKernels fused = FusedKernels::kOff);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight;

 private:
  double eps_;
  bool recomputed_;
  FusedKernels fused_;
};
TORCH_MODULE(RmsNorm);

class LlamaAttentionImpl : public torch::nn::Module {
 public:
  LlamaAttentionImpl(const core::HfModelConfig& config, const LlamaOptions& options);
  // x [B, T, H]; cos/sin [T, head_dim] in x's dtype; mask over T positions.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                        const AttentionMask& mask);
  // Incremental decoding (llama_decode.cc): x [B, t, H]; cos/sin [B, 1, t, head_dim] per row; appends this
  // layer's K/V to `cache` and attends over its slots [0, length + t); `masked` [B, 1, t, length + t].
  torch::Tensor Decode(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                       const torch::Tensor& masked, KvCache& cache, int64_t layer);
  // The fixed-shape step (static_decode.h): x [B, 1, H]; writes this layer's K/V at the device-side `slot`
  // and attends over every slot of the pass (GroupedDecodeAttention); `masked` [B, 1, 1, capacity].
  torch::Tensor DecodeAt(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                         const torch::Tensor& masked, const torch::Tensor& slot, KvCache& cache,
                         int64_t layer);
  LoraLinear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};

 private:
  // x [B, T, H] projected to q [B, heads, T, D] and k, v [B, kv_heads, T, D], RoPE applied to q and k: the
  // training forward's and Decode's common first half.
  std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> RotatedQkv(const torch::Tensor& x,
                                                                     const torch::Tensor& cos,
                                                                     const torch::Tensor& sin);
  int64_t num_heads_, num_kv_heads_, head_dim_;
  AttentionKernel kernel_;  // resolved: kManual or kSdpa
  FusedKernels fused_;      // the rotary embedding as one kernel each way where it takes q (FusedRope)
};
TORCH_MODULE(LlamaAttention);

class LlamaMlpImpl : public torch::nn::Module {
 public:
  LlamaMlpImpl(const core::HfModelConfig& config, const LlamaOptions& options);
  torch::Tensor forward(const torch::Tensor& x);
  LoraLinear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};

 private:
  bool lean_gate_;  // SwiGluThenDown (swiglu.h); off inside checkpointed layers, like the norms'
  FusedKernels fused_;
};
TORCH_MODULE(LlamaMlp);

class LlamaDecoderLayerImpl : public torch::nn::Module {
 public:
  LlamaDecoderLayerImpl(const core::HfModelConfig& config, const LlamaOptions& options);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                        const AttentionMask& mask);
  torch::Tensor Decode(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                       const torch::Tensor& masked, KvCache& cache, int64_t layer);
  torch::Tensor DecodeAt(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                         const torch::Tensor& masked, const torch::Tensor& slot, KvCache& cache,
                         int64_t layer);
  LlamaAttention self_attn{nullptr};
  LlamaMlp mlp{nullptr};
  RmsNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
};
TORCH_MODULE(LlamaDecoderLayer);

// The "model" submodule (HF's LlamaModel): embed_tokens, layers, norm. The forward pass lives in LlamaModel.
class LlamaBackboneImpl : public torch::nn::Module {
 public:
  LlamaBackboneImpl(const core::HfModelConfig& config, const LlamaOptions& options);
  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};
  std::vector<LlamaDecoderLayer> typed_layers;  // the same modules as `layers`, typed
  RmsNorm norm{nullptr};
};
TORCH_MODULE(LlamaBackbone);

// What LoadWeights did besides copying the expected tensors.
struct LlamaLoadReport {
  // Tensors in the checkpoint that this model has no use for and were skipped: lm_head.weight when loading
  // a causal-LM checkpoint into a reward model (or into a tied model), rotary caches (*.rotary_emb.inv_freq).
  std::vector<std::string> ignored;
  // Reward head missing from the checkpoint (a reward model initialised from a causal LM): it keeps its
  // fresh N(0, 1/hidden_size) init (llama_model.cc says why it is not transformers' initializer_range).
  bool score_head_initialized = false;
};

// The device-side inputs of LlamaModelImpl::DecodeStepAt, every tensor on the model's device.
struct StaticDecodeInputs {
  torch::Tensor ids;        // [B, 1] int64
  torch::Tensor positions;  // [B, 1] int64, negative for a finished row (padding)
  torch::Tensor slot;       // [1] int64: the cache slot this step writes
  // RotaryCosSin of the pass's capacity in the model's dtype, [capacity, head_dim] each: a row per position.
  torch::Tensor cos_table, sin_table;
};

class LlamaModelImpl : public torch::nn::Module {
 public:
  // Throws c10::Error if ValidateLlamaConfig fails; MakeLlamaModel returns that error as a Status instead.
  LlamaModelImpl(const core::HfModelConfig& config, const LlamaOptions& options = {});

  // input_ids [B, T] int64 -> hidden states after the final norm [B, T, hidden], model dtype.
  torch::Tensor Hidden(const torch::Tensor& input_ids);
  // [B, T, vocab], model dtype. Requires a causal-LM head (not reward_head).
  torch::Tensor Logits(const torch::Tensor& input_ids);
  // Reward: the score head at the position transformers reads for this config's pad_token_id
  // (RewardReadoutPositions: the last token that is not pad_token_id, or lengths[b] - 1 without one), fp32,
  // [B] (num_labels == 1) or [B, num_labels]. lengths [B] int64, each in [1, T]; with a pad_token_id the
  // positions from lengths[b] on must hold it.
  // Checks them with one host read (a synchronisation on a GPU): for batches that arrive on the device
  // unchecked (GRPO's reward model, which reads its scores back anyway).
  torch::Tensor Scores(const torch::Tensor& input_ids, const torch::Tensor& lengths);
  // The same score at given positions [B] int64 (RewardReadoutPositions of the batch, found on the host
  // where it was built: PairTensors::readout), moved to the model's device; no host read.
  torch::Tensor ScoresAt(const torch::Tensor& input_ids, const torch::Tensor& positions);
  // [B, T-1-from], fp32: column j is log p(input_ids[:, t+1] | input_ids[:, <= t]) at t = from + j,
  // log_softmax computed in fp32. Through ChunkedTokenLogProbs: neither forward nor backward holds the
  // [B, T-1, vocab] fp32 logits, only one chunk of rows (LlamaOptions.log_prob_chunk_rows) at a time.
  // `from` in [0, T-2] skips the head (the vocabulary-sized matmuls) for positions no loss reads: the
  // prompts' (PairTensors::head_from). `top_logp` (optional) receives the same shape's log p of the most
  // likely token at each position, without gradient (ChunkedTokenLogProbs): a prediction is right where
  // the two are equal. `temperature` (> 0): the log-probs of softmax(logits / temperature), the distribution
  // GRPO's rollouts were sampled from, as TRL's GRPOTrainer scores its completions (the hidden states are
  // divided before the head, which equals dividing the logits up to rounding).
  torch::Tensor TokenLogProbs(const torch::Tensor& input_ids, int64_t from = 0,
                              torch::Tensor* top_logp = nullptr, double temperature = 1.0);
  // The same through the full logits (the computation TokenLogProbs replaced): the tests' oracle.
  torch::Tensor TokenLogProbsFullLogits(const torch::Tensor& input_ids);

  // One step of incremental decoding (llama_decode.cc). input_ids [B, t] int64 are appended to `cache`
  // (begun for B rows, room for t more positions); positions [B, t] int64 are each token's position for
  // RoPE, and a negative position marks padding that no other token attends to (left-padded prompts use
  // transformers' position_ids = cumsum(mask) - 1 for the real tokens). A token attends to the cached and
  // new tokens of its row whose position is <= its own (and within Mistral's sliding window). Returns the
  // logits of the last of the t positions, [B, vocab] fp32; the training forward is untouched. Rotary
  // tables follow RotaryCosSin for max(positions) + 1 positions (dynamic NTK then rescales with the
  // longest position so far, as transformers' generate does). Runs the manual attention kernel.
  torch::Tensor DecodeStep(const torch::Tensor& input_ids, const torch::Tensor& positions, KvCache& cache);
  // The same step for one token per row with every shape fixed for the pass and nothing read on the host,
  // so that it can be recorded once as a CUDA graph and replayed for every later token (static_decode.h
  // runs it). The token is written at cache slot `in.slot` (a device tensor holding cache.length()); the
  // attention covers every slot of the pass, those not yet written masked by their position -1. Does not
  // advance the cache. Returns [B, vocab] fp32, as DecodeStep for the same tokens up to rounding (other
  // matmul batches, softmax over the masked slots' zeros too).
  torch::Tensor DecodeStepAt(const StaticDecodeInputs& in, KvCache& cache);

  // Folds every LoRA adapter into its base weight (see LoraLinearImpl::MergeInPlace). Outputs unchanged.
  void MergeLora();
  // The bytes of every parameter (adapters included) in its own dtype: what a copy of the model holds.
  int64_t parameter_bytes() const;
  // The model as Hugging Face stores it: HF names in named_parameters() order, LoRA merged into the base
  // weights, no adapter tensors; detached tensors in the model's dtype and device (new tensors where merged,
  // otherwise the parameters' own storage).
  std::vector<std::pair<std::string, torch::Tensor>> HfStateDict() const;

  // Copies every tensor the model expects from `weights` by HF name, converting F32/BF16/F16 to the model's
  // dtype. Errors (nothing is copied then) name a missing tensor, a shape mismatch (both shapes), an
  // unsupported dtype, or unexpected tensors; see LlamaLoadReport for what is tolerated. Writes the
  // parameters in place: load before binding the model to an optimizer (Zero2Binding copies them into its
  // master weights). A read error in the middle of the copy leaves the model partly loaded.
  absl::Status LoadWeights(const core::SafetensorsModel& weights, LlamaLoadReport* report = nullptr);
  // Writes `dir`/model.safetensors (HfStateDict(), model dtype) and `dir`/config.json (`config` with the
  // architecture, num_labels and torch_dtype of this model) so transformers' from_pretrained loads it.
  // `config` must describe this model's shapes (the error names the first field that differs); for a reward
  // model also its pad_token_id, which decides where transformers reads the score.
  absl::Status ExportHf(const std::string& dir, const core::HfModelConfig& config) const;

  const core::HfModelConfig& config() const { return config_; }
  const LlamaOptions& options() const { return options_; }
  int64_t head_dim() const { return head_dim_; }

  LlamaBackbone model{nullptr};
  torch::nn::Linear lm_head{nullptr};  // absent when tied or reward_head
  torch::nn::Linear score{nullptr};    // reward_head only

 private:
  // The hidden states of the positions that predict a next token, [B, T-1, hidden], after the checks that
  // a causal-LM head exists and that T >= 2 (errors name `caller`).
  torch::Tensor PredictingHidden(const torch::Tensor& input_ids, const char* caller, int64_t from = 0);

  core::HfModelConfig config_;  // head_dim and num_key_value_heads resolved
  LlamaOptions options_;
  int64_t head_dim_;
};
TORCH_MODULE(LlamaModel);

absl::StatusOr<LlamaModel> MakeLlamaModel(const core::HfModelConfig& config,
                                          const LlamaOptions& options = {});

// For its lifetime every LoRA adapter of `model` is disabled: the model computes its frozen base, as PEFT's
// `with model.disable_adapter():` does. TRL computes a LoRA run's reference log-probs this way, with no
// second copy of the weights; so do the DPO and GRPO sessions (ReferenceStrategy::kLoraBase). Not
// reentrant; the adapters are enabled again when it ends.
class AdaptersOff {
 public:
  explicit AdaptersOff(LlamaModelImpl& model);
  ~AdaptersOff();
  AdaptersOff(const AdaptersOff&) = delete;
  AdaptersOff& operator=(const AdaptersOff&) = delete;

 private:
  std::vector<LoraLinearImpl*> layers_;
};

}  // namespace zerofit::worker
