#include "worker/torch/model/llama_model.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"
#include "worker/torch/model/activation_checkpoint.h"
#include "worker/torch/model/chunked_log_probs.h"
#include "worker/torch/model/reward_readout.h"
#include "worker/torch/model/swiglu.h"

namespace zerofit::worker {
namespace {

// The lean RMSNorm and SwiGLU (LlamaOptions.lean_pieces) outside checkpointed layers, whose recomputation
// runs the plain graphs.
bool LeanPieces(const LlamaOptions& o) { return o.lean_pieces && !o.activation_checkpointing; }

constexpr double kPi = 3.141592653589793;  // Python's math.pi, as transformers uses

constexpr const char* kLoraTargets[] = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                        "gate_proj", "up_proj", "down_proj"};

// head_dim and num_key_value_heads with Hugging Face's defaults applied.
core::HfModelConfig Resolve(core::HfModelConfig c) {
  if (c.num_key_value_heads == 0) c.num_key_value_heads = c.num_attention_heads;
  if (c.head_dim == 0 && c.num_attention_heads > 0) c.head_dim = c.hidden_size / c.num_attention_heads;
  return c;
}

std::string Family(const std::string& model_type) {
  if (model_type == "llama") return "Llama";
  if (model_type == "mistral") return "Mistral";
  return "Qwen2";
}

const char* DtypeName(torch::Dtype t) {
  switch (t) {
    case torch::kFloat32:
      return "float32";
    case torch::kBFloat16:
      return "bfloat16";
    default:
      return "float16";
  }
}

bool IsLoraName(const std::string& name) {
  auto ends_with = [&](const char* suffix) {
    const size_t n = std::strlen(suffix);
    return name.size() >= n && name.compare(name.size() - n, n, suffix) == 0;
  };
  return ends_with(".lora_A") || ends_with(".lora_B");
}

bool TargetsModule(const LoraConfig& lora, const char* name) {
  if (!lora.enabled()) return false;
  for (const std::string& t : lora.target_modules)
    if (t == name) return true;
  return false;
}

LoraLinear MakeLinear(const LlamaOptions& o, const char* name, int64_t in, int64_t out, bool bias) {
  const int64_t rank = TargetsModule(o.lora, name) ? o.lora.rank : 0;
  return LoraLinear(in, out, bias, rank, o.lora.alpha, o.lora.dropout, o.initializer_range);
}

std::string ShapeStr(c10::IntArrayRef shape) { return absl::StrCat("[", absl::StrJoin(shape, ", "), "]"); }

// Causal attention over t positions, with Mistral's sliding window where it is shorter than t.
AttentionMask MakeAttentionMask(const core::HfModelConfig& c, int64_t t, torch::Device device) {
  torch::Tensor all = torch::ones({t, t}, torch::TensorOptions().dtype(torch::kBool).device(device));
  torch::Tensor mask = all.triu(1);
  if (!c.sliding_window || *c.sliding_window >= t) return AttentionMask{mask, /*causal_only=*/true};
  // Qwen2 with use_sliding_window applies the window only to some layers (max_window_layers, which
  // HfModelConfig does not carry): within the window every variant is plain causal attention.
  TORCH_CHECK(c.model_type == "mistral", "sequence length ", t, " exceeds the sliding window (",
              *c.sliding_window, ") of this ", c.model_type, " model; only Mistral's window is implemented");
  // Mistral masks keys j <= i - sliding_window, as transformers does.
  return AttentionMask{mask.logical_or(all.tril(-*c.sliding_window)), /*causal_only=*/false};
}

absl::StatusOr<torch::Dtype> TorchDtype(core::StDType t) {
  switch (t) {
    case core::StDType::kF32:
      return torch::kFloat32;
    case core::StDType::kBF16:
      return torch::kBFloat16;
    case core::StDType::kF16:
      return torch::kFloat16;
    default:
      return absl::InvalidArgumentError(absl::StrCat("dtype ", core::StDTypeName(t), " cannot be loaded"));
  }
}

core::StDType StDtype(torch::Dtype t) {
  switch (t) {
    case torch::kFloat32:
      return core::StDType::kF32;
    case torch::kBFloat16:
      return core::StDType::kBF16;
    default:
      return core::StDType::kF16;
  }
}

absl::Status WriteTextFile(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return absl::InternalError(absl::StrCat("cannot create ", tmp, ": ", std::strerror(errno)));
    out << text;
    out.close();
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", tmp, ": ", std::strerror(errno)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return absl::InternalError(absl::StrCat("cannot rename ", tmp, " to ", path, ": ", std::strerror(errno)));
  return absl::OkStatus();
}

// Name of the first shape-determining field in which `a` and `b` differ, or "" if none does.
std::string FirstStructuralDifference(const core::HfModelConfig& a, const core::HfModelConfig& b,
                                      bool compare_tying) {
  if (a.model_type != b.model_type) return "model_type";
  if (a.vocab_size != b.vocab_size) return "vocab_size";
  if (a.hidden_size != b.hidden_size) return "hidden_size";
  if (a.intermediate_size != b.intermediate_size) return "intermediate_size";
  if (a.num_hidden_layers != b.num_hidden_layers) return "num_hidden_layers";
  if (a.num_attention_heads != b.num_attention_heads) return "num_attention_heads";
  if (a.num_key_value_heads != b.num_key_value_heads) return "num_key_value_heads";
  if (a.head_dim != b.head_dim) return "head_dim";
  if (a.attention_bias != b.attention_bias) return "attention_bias";
  if (compare_tying && a.tie_word_embeddings != b.tie_word_embeddings) return "tie_word_embeddings";
  return "";
}

}  // namespace

absl::Status ValidateLlamaConfig(const core::HfModelConfig& raw, const LlamaOptions& options) {
  const core::HfModelConfig c = Resolve(raw);
  auto bad = [](const std::string& field, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("model config: ", field, " ", why));
  };
  if (c.model_type != "llama" && c.model_type != "mistral" && c.model_type != "qwen2")
    return bad("model_type", absl::StrCat("'", c.model_type, "' is not one of llama, mistral, qwen2"));
  if (c.vocab_size <= 0) return bad("vocab_size", "must be positive");
  if (c.hidden_size <= 0) return bad("hidden_size", "must be positive");
  if (c.intermediate_size <= 0) return bad("intermediate_size", "must be positive");
  if (c.num_hidden_layers <= 0) return bad("num_hidden_layers", "must be positive");
  if (c.num_attention_heads <= 0) return bad("num_attention_heads", "must be positive");
  if (c.num_key_value_heads <= 0 || c.num_attention_heads % c.num_key_value_heads != 0)
    return bad("num_key_value_heads",
               absl::StrCat("(", c.num_key_value_heads, ") must divide num_attention_heads (",
                            c.num_attention_heads, ")"));
  if (raw.head_dim == 0 && c.hidden_size % c.num_attention_heads != 0)
    return bad("hidden_size", "must be a multiple of num_attention_heads when head_dim is not given");
  if (c.head_dim <= 0 || c.head_dim % 2 != 0) return bad("head_dim", "must be positive and even (rotary)");
  if (!(c.rms_norm_eps > 0)) return bad("rms_norm_eps", "must be positive");
  if (!(c.rope_theta > 0)) return bad("rope_theta", "must be positive");
  if (c.max_position_embeddings <= 0) return bad("max_position_embeddings", "must be positive");
  if (c.rope_scaling) {
    const core::RopeScaling& r = *c.rope_scaling;
    if (r.type == "linear" || r.type == "dynamic" || r.type == "llama3") {
      if (!(r.factor > 0)) return bad("rope_scaling.factor", "must be positive");
    } else if (!r.type.empty() && r.type != "default") {
      return absl::UnimplementedError(absl::StrCat("model config: rope_scaling type '", r.type,
                                                   "' is not supported (linear, dynamic, llama3 are)"));
    }
    if (r.type == "llama3") {
      if (!(r.low_freq_factor > 0) || !(r.high_freq_factor > r.low_freq_factor))
        return bad("rope_scaling", "needs 0 < low_freq_factor < high_freq_factor");
      if (r.original_max_position_embeddings <= 0)
        return bad("rope_scaling.original_max_position_embeddings", "must be positive");
    }
  }
  if (options.reward_head && c.num_labels < 1) return bad("num_labels", "must be >= 1 for a reward head");
  if (options.reward_head && c.pad_token_id && (*c.pad_token_id < 0 || *c.pad_token_id >= c.vocab_size)) {
    // transformers would find no padding and read every padded row at its last position.
    return bad("pad_token_id",
               absl::StrCat(*c.pad_token_id, " is outside the vocabulary [0, ", c.vocab_size,
                            "): a reward model reads its score at the last token that is not pad_token_id; "
                            "set it to the id the tokenizer pads with, or remove it"));
  }
  if (options.dtype != torch::kFloat32 && options.dtype != torch::kBFloat16 &&
      options.dtype != torch::kFloat16)
    return absl::InvalidArgumentError("LlamaOptions.dtype must be float32, bfloat16 or float16");
  if (absl::StatusOr<AttentionKernel> k = ResolveAttentionKernel(options.attention); !k.ok())
    return absl::Status(k.status().code(), absl::StrCat("LlamaOptions.attention: ", k.status().message()));
  if (options.log_prob_chunk_rows < 0)
    return absl::InvalidArgumentError("LlamaOptions.log_prob_chunk_rows must be >= 0 (0: the default)");
  const LoraConfig& l = options.lora;
  if (l.rank < 0) return absl::InvalidArgumentError("LoraConfig.rank must be >= 0");
  if (l.enabled()) {
    if (!(l.alpha > 0)) return absl::InvalidArgumentError("LoraConfig.alpha must be positive");
    if (!(l.dropout >= 0 && l.dropout < 1))
      return absl::InvalidArgumentError("LoraConfig.dropout must be in [0, 1)");
    if (l.target_modules.empty())
      return absl::InvalidArgumentError("LoraConfig.target_modules is empty while rank > 0");
    for (const std::string& t : l.target_modules) {
      bool known = false;
      for (const char* k : kLoraTargets) known = known || t == k;
      if (!known)
        return absl::InvalidArgumentError(
            absl::StrCat("LoraConfig.target_modules: unknown module '", t,
                         "' (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj)"));
    }
  }
  return absl::OkStatus();
}

std::pair<torch::Tensor, torch::Tensor> RotaryCosSin(const core::HfModelConfig& raw, int64_t seq_len,
                                                     torch::Device device) {
  const core::HfModelConfig c = Resolve(raw);
  const int64_t dim = c.head_dim;
  const std::string type = c.rope_scaling ? c.rope_scaling->type : "";
  const torch::TensorOptions f32 = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  double base = c.rope_theta;
  if (type == "dynamic" && seq_len > c.max_position_embeddings) {
    // transformers' _compute_dynamic_ntk_parameters, with seq_len the length of this forward pass.
    const double factor = c.rope_scaling->factor;
    base *= std::pow(
        factor * static_cast<double>(seq_len) / static_cast<double>(c.max_position_embeddings) - (factor - 1),
        static_cast<double>(dim) / static_cast<double>(dim - 2));
  }
  torch::Tensor exponent = torch::arange(0, dim, 2, f32.dtype(torch::kInt64)).to(torch::kFloat32) / dim;
  torch::Tensor inv_freq = torch::reciprocal(torch::pow(base, exponent));
  if (type == "linear") {
    inv_freq = inv_freq / c.rope_scaling->factor;
  } else if (type == "llama3") {
    const core::RopeScaling& r = *c.rope_scaling;
    const double old_len = static_cast<double>(r.original_max_position_embeddings);
    const double low_freq_wavelen = old_len / r.low_freq_factor;
    const double high_freq_wavelen = old_len / r.high_freq_factor;
    torch::Tensor wavelen = 2 * kPi / inv_freq;
    torch::Tensor scaled = torch::where(wavelen > low_freq_wavelen, inv_freq / r.factor, inv_freq);
    torch::Tensor smooth = (old_len / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
    torch::Tensor smoothed = (1 - smooth) * scaled / r.factor + smooth * scaled;
    torch::Tensor medium = (wavelen >= high_freq_wavelen).logical_and(wavelen <= low_freq_wavelen);
    inv_freq = torch::where(medium, smoothed, scaled);
  }
  torch::Tensor positions = torch::arange(seq_len, f32.dtype(torch::kInt64)).to(torch::kFloat32);
  torch::Tensor freqs = torch::outer(positions, inv_freq);
  torch::Tensor emb = torch::cat({freqs, freqs}, -1);
  return {emb.cos(), emb.sin()};
}

torch::Tensor RotateHalf(const torch::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return torch::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
}

RmsNormImpl::RmsNormImpl(int64_t dim, double eps, bool recomputed, FusedKernels fused)
    : eps_(eps), recomputed_(recomputed), fused_(fused) {
  weight = register_parameter("weight", torch::ones({dim}));
}

namespace {

torch::Tensor PlainRmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  torch::Tensor h = x.to(torch::kFloat32);
  torch::Tensor variance = h.pow(2).mean(-1, /*keepdim=*/true);
  h = h * torch::rsqrt(variance + eps);
  return weight * h.to(x.scalar_type());
}

}  // namespace

torch::Tensor RmsNormImpl::forward(const torch::Tensor& x) {
  if (FusedKernelsTake(fused_, x, weight)) return FusedRmsNorm(x, weight, eps_);
  if (!recomputed_) return PlainRmsNorm(x, weight, eps_);
  // Recomputed in backward: autograd keeps x (and the weight) rather than the fp32 upcast and the
  // normalised copy: 4 of bf16's 8 bytes per element (docs/planning.md, "Lean RMSNorm and SwiGLU").
  const double eps = eps_;
  const torch::Tensor w = weight;
  return RecomputedCall(
      [eps, w](const std::vector<torch::Tensor>& in) { return PlainRmsNorm(in[0], w, eps); }, {x},
      w.requires_grad() ? std::vector<torch::Tensor>{w} : std::vector<torch::Tensor>{});
}

LlamaAttentionImpl::LlamaAttentionImpl(const core::HfModelConfig& c, const LlamaOptions& o)
    : num_heads_(c.num_attention_heads),
      num_kv_heads_(c.num_key_value_heads),
      head_dim_(c.head_dim),
      fused_(o.fused_kernels) {
  const absl::StatusOr<AttentionKernel> kernel = ResolveAttentionKernel(o.attention);
  TORCH_CHECK(kernel.ok(), "LlamaOptions.attention: ", std::string(kernel.status().message()));
  kernel_ = *kernel;
  const int64_t h = c.hidden_size;
  const bool o_bias = c.attention_bias && c.model_type == "llama";
  q_proj = register_module("q_proj", MakeLinear(o, "q_proj", h, num_heads_ * head_dim_, c.attention_bias));
  k_proj = register_module("k_proj", MakeLinear(o, "k_proj", h, num_kv_heads_ * head_dim_, c.attention_bias));
  v_proj = register_module("v_proj", MakeLinear(o, "v_proj", h, num_kv_heads_ * head_dim_, c.attention_bias));
  o_proj = register_module("o_proj", MakeLinear(o, "o_proj", num_heads_ * head_dim_, h, o_bias));
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> LlamaAttentionImpl::RotatedQkv(
    const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  const int64_t b = x.size(0), t = x.size(1);
  torch::Tensor q = q_proj(x).view({b, t, num_heads_, head_dim_});
  torch::Tensor k = k_proj(x).view({b, t, num_kv_heads_, head_dim_});
  torch::Tensor v = v_proj(x).view({b, t, num_kv_heads_, head_dim_}).transpose(1, 2);
  // [b, t, heads, d] rotated in place of layout, then the heads move forward: the layout the plain graph's
  // element-wise ops give their transposed input too.
  if (FusedKernelsTake(fused_, q, cos) && q.is_contiguous() && k.is_contiguous())
    return {FusedRope(q, cos, sin).transpose(1, 2), FusedRope(k, cos, sin).transpose(1, 2), v};
  q = q.transpose(1, 2);
  k = k.transpose(1, 2);
  q = q * cos + RotateHalf(q) * sin;
  k = k * cos + RotateHalf(k) * sin;
  return {q, k, v};
}

torch::Tensor LlamaAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& cos,
                                          const torch::Tensor& sin, const AttentionMask& mask) {
  const int64_t b = x.size(0), t = x.size(1);
  auto [q, k, v] = RotatedQkv(x, cos, sin);
  const double scale = std::pow(static_cast<double>(head_dim_), -0.5);
  torch::Tensor out = RunAttention(kernel_, q, k, v, mask, scale)
                          .transpose(1, 2)
                          .contiguous()
                          .reshape({b, t, num_heads_ * head_dim_});
  return o_proj(out);
}

LlamaMlpImpl::LlamaMlpImpl(const core::HfModelConfig& c, const LlamaOptions& o)
    : lean_gate_(LeanPieces(o)), fused_(o.fused_kernels) {
  gate_proj =
      register_module("gate_proj", MakeLinear(o, "gate_proj", c.hidden_size, c.intermediate_size, false));
  up_proj = register_module("up_proj", MakeLinear(o, "up_proj", c.hidden_size, c.intermediate_size, false));
  down_proj =
      register_module("down_proj", MakeLinear(o, "down_proj", c.intermediate_size, c.hidden_size, false));
}

torch::Tensor LlamaMlpImpl::forward(const torch::Tensor& x) {
  torch::Tensor product;
  {
    // Gate and up die before down's output is allocated (the planner's prefill MLP counts that).
    const torch::Tensor gate = gate_proj(x);
    const torch::Tensor up = up_proj(x);
    const bool fused = FusedKernelsTake(fused_, gate, up);
    // A frozen down projection without an adapter keeps no input, and without grad mode nothing keeps
    // anything: nothing to release, and gate and up die before down runs.
    const bool down_keeps_input =
        torch::GradMode::is_enabled() &&
        (down_proj->weight.requires_grad() || (down_proj->has_lora() && down_proj->adapter_enabled()));
    if (!lean_gate_ && !fused) {
      product = torch::silu(gate) * up;
    } else if (!lean_gate_ || !down_keeps_input) {
      product = SwiGlu(gate, up, fused);  // autograd keeps gate and up only (swiglu.h)
    } else {
      return SwiGluThenDown(
          gate, up, [this](const torch::Tensor& p) { return down_proj(p); }, fused);
    }
  }
  return down_proj(product);
}

// Registered in the order the forward uses them (HF registers both norms last): ZeRO-2 buckets parameters in
// reverse registration order and launches them in that order (sharding/bucket_plan.h), and backward produces
// a layer's gradients MLP first, the input norm last. In HF's order the bucket holding the input norm came
// first in the layer, so none of the layer's buckets could launch before the layer's backward had ended:
// every one of them held a staging buffer at once, and the reduce-scatters could not overlap that layer.
// The names, and so every checkpoint and export, are unchanged.
LlamaDecoderLayerImpl::LlamaDecoderLayerImpl(const core::HfModelConfig& c, const LlamaOptions& o) {
  input_layernorm = register_module("input_layernorm",
                                    RmsNorm(c.hidden_size, c.rms_norm_eps, LeanPieces(o), o.fused_kernels));
  self_attn = register_module("self_attn", LlamaAttention(c, o));
  post_attention_layernorm = register_module(
      "post_attention_layernorm", RmsNorm(c.hidden_size, c.rms_norm_eps, LeanPieces(o), o.fused_kernels));
  mlp = register_module("mlp", LlamaMlp(c, o));
}

torch::Tensor LlamaDecoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& cos,
                                             const torch::Tensor& sin, const AttentionMask& mask) {
  torch::Tensor h = x + self_attn(input_layernorm(x), cos, sin, mask);
  return h + mlp(post_attention_layernorm(h));
}

LlamaBackboneImpl::LlamaBackboneImpl(const core::HfModelConfig& c, const LlamaOptions& o) {
  torch::nn::EmbeddingOptions eo(c.vocab_size, c.hidden_size);
  // HF builds nn.Embedding(vocab, hidden, padding_idx=pad_token_id): the pad row starts at zero and never
  // receives a gradient.
  const bool has_pad = c.pad_token_id && *c.pad_token_id >= 0 && *c.pad_token_id < c.vocab_size;
  if (has_pad) eo.padding_idx(*c.pad_token_id);
  embed_tokens = register_module("embed_tokens", torch::nn::Embedding(eo));
  {
    torch::NoGradGuard no_grad;
    embed_tokens->weight.normal_(0, o.initializer_range);
    if (has_pad) embed_tokens->weight[*c.pad_token_id].zero_();
  }
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    typed_layers.push_back(LlamaDecoderLayer(c, o));
    layers->push_back(typed_layers.back());
  }
  norm = register_module("norm", RmsNorm(c.hidden_size, c.rms_norm_eps, LeanPieces(o), o.fused_kernels));
}

LlamaModelImpl::LlamaModelImpl(const core::HfModelConfig& config, const LlamaOptions& options)
    : config_(Resolve(config)), options_(options), head_dim_(config_.head_dim) {
  const absl::Status valid = ValidateLlamaConfig(config, options);
  TORCH_CHECK(valid.ok(), std::string(valid.message()));
  model = register_module("model", LlamaBackbone(config_, options_));
  const int64_t h = config_.hidden_size;
  if (options_.reward_head) {
    score = register_module("score",
                            torch::nn::Linear(torch::nn::LinearOptions(h, config_.num_labels).bias(false)));
  } else if (!config_.tie_word_embeddings) {
    lm_head = register_module("lm_head",
                              torch::nn::Linear(torch::nn::LinearOptions(h, config_.vocab_size).bias(false)));
  }
  {
    torch::NoGradGuard no_grad;
    // The reward head is the one fresh layer on a trained trunk. Hugging Face draws it from N(0,
    // initializer_range = 0.02), about 1/sqrt(hidden) for a 4096-wide model; a narrow one then starts with
    // scores near 0 and a trunk gradient (proportional to the head's weights) too small to move it: a
    // 64-wide arithmetic reward model sat at 50% held-out accuracy for 500+ of 1000 steps in 2 of 3 seeds.
    // N(0, 1/hidden) gives scores of unit scale from unit-RMS hidden states at any width (DeepSpeed-Chat's
    // nn.Linear default is of the same order): 9 of 9 runs over seeds and OpenBLAS kernels reached >= 96.5%
    // (BENCHMARKS.md, issue 29, "A reward head of unit scale").
    if (score) score->weight.normal_(0, 1.0 / std::sqrt(static_cast<double>(h)));
    if (lm_head) lm_head->weight.normal_(0, options_.initializer_range);
  }
  if (options_.dtype != torch::kFloat32) to(options_.dtype);
  if (options_.lora.enabled()) {
    for (auto& item : named_parameters(/*recurse=*/true))
      item.value().requires_grad_(IsLoraName(item.key()) || item.key() == "score.weight");
  }
}

torch::Tensor LlamaModelImpl::Hidden(const torch::Tensor& input_ids) {
  TORCH_CHECK(input_ids.dim() == 2 && input_ids.scalar_type() == torch::kInt64,
              "input_ids must be [batch, seq] int64, got ", input_ids.sizes(), " ", input_ids.scalar_type());
  const int64_t t = input_ids.size(1);
  TORCH_CHECK(t > 0, "input_ids has no positions");
  const torch::Device device = model->embed_tokens->weight.device();
  // Plain variables, not structured bindings: C++17 lambdas cannot capture those.
  std::pair<torch::Tensor, torch::Tensor> rotary = RotaryCosSin(config_, t, device);
  const torch::Tensor cos = rotary.first.to(options_.dtype);
  const torch::Tensor sin = rotary.second.to(options_.dtype);
  const AttentionMask mask = MakeAttentionMask(config_, t, device);
  torch::Tensor x = model->embed_tokens(input_ids);
  const bool checkpoint = options_.activation_checkpointing && torch::GradMode::is_enabled();
  for (LlamaDecoderLayer& layer : model->typed_layers) {
    if (!checkpoint) {
      x = layer->forward(x, cos, sin, mask);
      continue;
    }
    std::vector<torch::Tensor> trainable;
    for (const torch::Tensor& p : layer->parameters())
      if (p.requires_grad()) trainable.push_back(p);
    std::shared_ptr<LlamaDecoderLayerImpl> impl = layer.ptr();
    x = CheckpointedCall(
        [impl, cos, sin, mask](const torch::Tensor& in) { return impl->forward(in, cos, sin, mask); }, x,
        trainable);
  }
  return model->norm(x);
}

torch::Tensor LlamaModelImpl::Logits(const torch::Tensor& input_ids) {
  TORCH_CHECK(!score, "Logits: this is a reward model (no lm_head); use Scores");
  torch::Tensor h = Hidden(input_ids);
  return lm_head ? lm_head(h) : torch::linear(h, model->embed_tokens->weight);
}

torch::Tensor LlamaModelImpl::PredictingHidden(const torch::Tensor& input_ids, const char* caller,
                                               int64_t from) {
  TORCH_CHECK(!score, caller, ": this is a reward model (no lm_head)");
  TORCH_CHECK(input_ids.dim() == 2 && input_ids.size(1) >= 2, caller, " needs [batch, seq >= 2] input_ids");
  TORCH_CHECK(from >= 0 && from <= input_ids.size(1) - 2, caller, ": from ", from, " is not in [0, ",
              input_ids.size(1) - 2, "]");
  // The last position predicts nothing in the sequence, and those before `from` nothing a loss reads: skip
  // their (vocab-sized) head computation.
  return Hidden(input_ids).slice(1, from, input_ids.size(1) - 1);
}

torch::Tensor LlamaModelImpl::TokenLogProbs(const torch::Tensor& input_ids, int64_t from,
                                            torch::Tensor* top_logp, double temperature) {
  TORCH_CHECK(temperature > 0, "TokenLogProbs: temperature must be > 0, got ", temperature);
  torch::Tensor h = PredictingHidden(input_ids, "TokenLogProbs", from);
  if (temperature != 1.0) h = h / temperature;
  // The head is always a plain bias-free linear: LoRA never targets lm_head (kLoraTargets) and the
  // constructor builds it without a bias, so its weight is the whole head and the chunked path is exact.
  const torch::Tensor& w = lm_head ? lm_head->weight : model->embed_tokens->weight;
  // [B, T-1, H] -> [B(T-1), H]: a copy for B > 1 (the slice is strided), which the head keeps for backward
  // instead of the norm's full-length output that linear() would have kept.
  torch::Tensor top;
  torch::Tensor logp = ChunkedTokenLogProbs(
      h.reshape({-1, h.size(2)}), w, torch::Tensor(), input_ids.slice(1, from + 1).reshape({-1}),
      options_.log_prob_chunk_rows, top_logp != nullptr ? &top : nullptr);
  if (top_logp != nullptr) *top_logp = top.view({input_ids.size(0), h.size(1)});
  return logp.view({input_ids.size(0), h.size(1)});
}

torch::Tensor LlamaModelImpl::TokenLogProbsFullLogits(const torch::Tensor& input_ids) {
  torch::Tensor h = PredictingHidden(input_ids, "TokenLogProbsFullLogits");
  torch::Tensor logits = lm_head ? lm_head(h) : torch::linear(h, model->embed_tokens->weight);
  torch::Tensor logp = torch::log_softmax(logits.to(torch::kFloat32), -1);
  return logp.gather(-1, input_ids.slice(1, 1).unsqueeze(-1)).squeeze(-1);
}

torch::Tensor LlamaModelImpl::Scores(const torch::Tensor& input_ids, const torch::Tensor& lengths) {
  TORCH_CHECK(score, "Scores: this model has no reward head (LlamaOptions.reward_head)");
  // RewardReadoutPositions checks the shapes and that every length lies in [1, T], within its one host read.
  return ScoresAt(input_ids, RewardReadoutPositions(input_ids, lengths, config_.pad_token_id));
}

torch::Tensor LlamaModelImpl::ScoresAt(const torch::Tensor& input_ids, const torch::Tensor& positions) {
  TORCH_CHECK(score, "ScoresAt: this model has no reward head (LlamaOptions.reward_head)");
  TORCH_CHECK(input_ids.dim() == 2, "input_ids must be [batch, seq]");
  const int64_t b = input_ids.size(0);
  TORCH_CHECK(positions.dim() == 1 && positions.size(0) == b && positions.scalar_type() == torch::kInt64,
              "positions must be [batch] int64, got ", positions.sizes(), " ", positions.scalar_type());
  torch::Tensor h = Hidden(input_ids);
  torch::Tensor index = positions.to(h.device()).view({b, 1, 1}).expand({b, 1, h.size(2)});
  torch::Tensor s = score(h.gather(1, index).squeeze(1)).to(torch::kFloat32);
  return s.size(-1) == 1 ? s.squeeze(-1) : s;
}

AdaptersOff::AdaptersOff(LlamaModelImpl& model) {
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    auto* lin = item.value()->as<LoraLinearImpl>();
    if (lin == nullptr || !lin->has_lora()) continue;
    lin->set_adapter_enabled(false);
    layers_.push_back(lin);
  }
}

AdaptersOff::~AdaptersOff() {
  for (LoraLinearImpl* lin : layers_) lin->set_adapter_enabled(true);
}

void LlamaModelImpl::MergeLora() {
  for (const auto& item : named_modules("", /*include_self=*/false))
    if (auto* lin = item.value()->as<LoraLinearImpl>()) lin->MergeInPlace();
}

int64_t LlamaModelImpl::parameter_bytes() const {
  int64_t bytes = 0;
  for (const torch::Tensor& p : parameters()) bytes += p.numel() * p.element_size();
  return bytes;
}

std::vector<std::pair<std::string, torch::Tensor>> LlamaModelImpl::HfStateDict() const {
  std::map<std::string, torch::Tensor> merged;
  for (const auto& item : named_modules("", /*include_self=*/false)) {
    const auto* lin = item.value()->as<LoraLinearImpl>();
    if (lin != nullptr && lin->has_lora()) merged[item.key() + ".weight"] = lin->MergedWeight();
  }
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : named_parameters(/*recurse=*/true)) {
    if (IsLoraName(item.key())) continue;
    auto it = merged.find(item.key());
    out.emplace_back(item.key(), it != merged.end() ? it->second : item.value().detach());
  }
  return out;
}

absl::Status LlamaModelImpl::LoadWeights(const core::SafetensorsModel& weights, LlamaLoadReport* report) {
  try {
    LlamaLoadReport local;
    struct Copy {
      std::string name;
      torch::Tensor param;
      torch::Dtype file_dtype;
      std::vector<int64_t> shape;
    };
    std::vector<Copy> copies;
    std::set<std::string> expected;
    // Validate everything first, so a bad checkpoint leaves the model untouched.
    for (const auto& item : named_parameters(/*recurse=*/true)) {
      const std::string& name = item.key();
      if (IsLoraName(name)) continue;  // adapters are not part of a Hugging Face checkpoint
      expected.insert(name);
      const torch::Tensor& p = item.value();
      const core::StTensorInfo* info = weights.Find(name);
      if (info == nullptr) {
        if (name == "score.weight") {
          local.score_head_initialized = true;
          continue;
        }
        return absl::NotFoundError(absl::StrCat("checkpoint has no tensor '", name,
                                                "' (the model expects shape ", ShapeStr(p.sizes()), ")"));
      }
      if (info->shape != p.sizes().vec()) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor '", name, "' has shape ", ShapeStr(info->shape),
                         " in the checkpoint but the model expects ", ShapeStr(p.sizes())));
      }
      absl::StatusOr<torch::Dtype> dt = TorchDtype(info->dtype);
      if (!dt.ok())
        return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': ", dt.status().message(),
                                                       " (F32, BF16 and F16 are supported)"));
      copies.push_back(Copy{name, p, *dt, info->shape});
    }
    std::vector<std::string> unexpected;
    for (const std::string& name : weights.names()) {
      if (expected.count(name)) continue;
      const std::string rotary = ".rotary_emb.inv_freq";
      const bool rotary_cache = name.size() >= rotary.size() &&
                                name.compare(name.size() - rotary.size(), rotary.size(), rotary) == 0;
      if (rotary_cache || (name == "lm_head.weight" && !lm_head)) {
        local.ignored.push_back(name);
      } else {
        unexpected.push_back(name);
      }
    }
    if (!unexpected.empty()) {
      const size_t shown = std::min<size_t>(unexpected.size(), 8);
      return absl::InvalidArgumentError(
          absl::StrCat(unexpected.size(), " tensor(s) in the checkpoint are not part of this ",
                       Family(config_.model_type), options_.reward_head ? " reward" : "",
                       " model: ", absl::StrJoin(unexpected.begin(), unexpected.begin() + shown, ", "),
                       shown < unexpected.size() ? ", ..." : ""));
    }
    torch::NoGradGuard no_grad;
    for (const Copy& c : copies) {
      torch::Tensor buffer = torch::empty(c.shape, torch::TensorOptions().dtype(c.file_dtype));
      ZF_RETURN_IF_ERROR(weights.Read(c.name, buffer.data_ptr(), buffer.nbytes()));
      c.param.copy_(buffer);
    }
    if (report != nullptr) *report = std::move(local);
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("loading weights failed: ", e.what()));
  }
}

absl::Status LlamaModelImpl::ExportHf(const std::string& dir, const core::HfModelConfig& config) const {
  core::HfModelConfig out = Resolve(config);
  const std::string diff = FirstStructuralDifference(out, config_, /*compare_tying=*/!options_.reward_head);
  if (!diff.empty())
    return absl::InvalidArgumentError(
        absl::StrCat("ExportHf: config field ", diff, " does not describe this model"));
  if (score && out.pad_token_id != config_.pad_token_id) {
    // transformers picks the token it reads the score from by pad_token_id (reward_readout.h).
    auto id = [](const std::optional<int64_t>& v) { return v ? absl::StrCat(*v) : std::string("none"); };
    return absl::InvalidArgumentError(absl::StrCat(
        "ExportHf: pad_token_id ", id(out.pad_token_id), " differs from the model's ",
        id(config_.pad_token_id),
        ", which chose the token its scores were trained on; transformers would read another token"));
  }
  const std::string family = Family(config_.model_type);
  if (score) {
    out.architecture = family + "ForSequenceClassification";
    out.num_labels = score->weight.size(0);
  } else {
    out.architecture = family + "ForCausalLM";
  }
  out.torch_dtype = DtypeName(options_.dtype);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create directory ", dir, ": ", ec.message()));
  try {
    std::vector<torch::Tensor> keep;  // owns the bytes WriteSafetensors reads
    std::vector<core::StTensorToWrite> tensors;
    for (auto& [name, t] : HfStateDict()) {
      keep.push_back(t.to(torch::kCPU).contiguous());
      tensors.push_back(core::StTensorToWrite{name, StDtype(options_.dtype), keep.back().sizes().vec(),
                                              keep.back().data_ptr()});
    }
    ZF_RETURN_IF_ERROR(core::WriteSafetensors(dir + "/model.safetensors", tensors, {{"format", "pt"}}));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("exporting weights to ", dir, " failed: ", e.what()));
  }
  return WriteTextFile(dir + "/config.json", core::HfConfigToJson(out));
}

absl::StatusOr<LlamaModel> MakeLlamaModel(const core::HfModelConfig& config, const LlamaOptions& options) {
  ZF_RETURN_IF_ERROR(ValidateLlamaConfig(config, options));
  try {
    return LlamaModel(config, options);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("building the model failed: ", e.what()));
  }
}

}  // namespace zerofit::worker
