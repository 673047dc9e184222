#include "worker/torch/model/generation.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"

namespace zerofit::worker {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Puts the model in eval mode for its lifetime and restores the previous mode.
class EvalModeScope {
 public:
  explicit EvalModeScope(torch::nn::Module& m) : module_(m), was_training_(m.is_training()) { m.eval(); }
  ~EvalModeScope() { module_.train(was_training_); }
  EvalModeScope(const EvalModeScope&) = delete;
  EvalModeScope& operator=(const EvalModeScope&) = delete;

 private:
  torch::nn::Module& module_;
  bool was_training_;
};

// The state of one pass: rows [first, first + rows) of the prompts.
struct Pass {
  int64_t first = 0, rows = 0, longest = 0;
  std::vector<int64_t> next_position;  // per row: the position its next token takes
  std::vector<bool> finished;
};

// Left-padded prompt ids and positions [rows, longest] (padding: pad_id at position -1).
std::pair<torch::Tensor, torch::Tensor> PromptTensors(const std::vector<std::vector<int64_t>>& prompts,
                                                      const Pass& pass, int64_t pad_id) {
  torch::Tensor ids = torch::full({pass.rows, pass.longest}, pad_id, torch::kInt64);
  torch::Tensor pos = torch::full({pass.rows, pass.longest}, -1, torch::kInt64);
  auto id = ids.accessor<int64_t, 2>();
  auto at = pos.accessor<int64_t, 2>();
  for (int64_t r = 0; r < pass.rows; ++r) {
    const std::vector<int64_t>& p = prompts[pass.first + r];
    const int64_t pad = pass.longest - static_cast<int64_t>(p.size());
    for (size_t j = 0; j < p.size(); ++j) {
      id[r][pad + static_cast<int64_t>(j)] = p[j];
      at[r][pad + static_cast<int64_t>(j)] = static_cast<int64_t>(j);
    }
  }
  return {ids, pos};
}

bool IsEos(const GenerationOptions& o, int64_t token) {
  return std::find(o.eos_ids.begin(), o.eos_ids.end(), token) != o.eos_ids.end();
}

// [B] float64: the entropy (nats) of softmax(logits / temperature) per row, temperature 1 when greedy.
torch::Tensor RowEntropy(const torch::Tensor& logits, double temperature) {
  const torch::Tensor scaled = logits.to(torch::kFloat32) / (temperature > 0 ? temperature : 1.0);
  const torch::Tensor logp = torch::log_softmax(scaled, -1);
  return -(logp.exp() * logp).sum(-1).to(torch::kFloat64);
}

// Decodes one pass into result->completions[pass.first ...].
void RunPass(LlamaModelImpl& model, const std::vector<std::vector<int64_t>>& prompts,
             const GenerationOptions& o, Pass& pass, KvCache& cache, GenerationResult* result) {
  const torch::Device device = model.model->embed_tokens->weight.device();
  std::pair<torch::Tensor, torch::Tensor> prompt = PromptTensors(prompts, pass, o.pad_id);
  torch::Tensor logits = model.DecodeStep(prompt.first.to(device), prompt.second.to(device), cache);
  std::unique_ptr<StaticDecoder> fixed;
  if (o.decode != DecodeMode::kEager) fixed = std::make_unique<StaticDecoder>(model, cache, o.decode);
  for (int64_t step = 0; step < o.max_new_tokens; ++step) {
    torch::Tensor uniforms = torch::empty({pass.rows}, torch::kFloat64);
    auto u = uniforms.accessor<double, 1>();
    for (int64_t r = 0; r < pass.rows; ++r) {
      const int64_t row = pass.first + r;
      const int64_t sequence = o.sequence_ids.empty() ? o.sequence_index_offset + row : o.sequence_ids[row];
      u[r] = SamplingUniform(o.seed, sequence, step);
    }
    // One read back a step (a synchronisation on a GPU): the tokens, exact in float64 (ids < 2^53), and the
    // entropies of the distributions they were drawn from.
    const torch::Tensor drawn =
        torch::stack({SampleTokens(logits, {o.temperature, o.top_p, o.top_k, o.min_p}, uniforms.to(device))
                          .to(torch::kFloat64),
                      RowEntropy(logits, o.temperature)})
            .to(torch::kCPU)
            .contiguous();
    auto token_of = drawn.accessor<double, 2>()[0];
    auto entropy_of = drawn.accessor<double, 2>()[1];
    torch::Tensor ids = torch::full({pass.rows, 1}, o.pad_id, torch::kInt64);
    torch::Tensor pos = torch::full({pass.rows, 1}, -1, torch::kInt64);
    auto id = ids.accessor<int64_t, 2>();
    auto at = pos.accessor<int64_t, 2>();
    bool all_finished = true;
    for (int64_t r = 0; r < pass.rows; ++r) {
      if (pass.finished[r]) continue;
      Completion& c = result->completions[pass.first + r];
      const auto token = static_cast<int64_t>(token_of[r]);
      c.tokens.push_back(token);
      c.entropies.push_back(static_cast<float>(entropy_of[r]));
      ++result->stats.tokens_generated;
      result->stats.entropy_sum += entropy_of[r];
      if (IsEos(o, token)) {
        pass.finished[r] = true;
        continue;
      }
      if (step + 1 == o.max_new_tokens) {
        c.hit_max_new_tokens = true;
        continue;
      }
      all_finished = false;
      id[r][0] = token;
      at[r][0] = pass.next_position[r]++;
    }
    if (all_finished) break;
    logits = fixed ? fixed->Step(ids, pos) : model.DecodeStep(ids.to(device), pos.to(device), cache);
  }
  if (fixed) result->stats.graph_replays += fixed->replays();
}

}  // namespace

absl::Status ValidateGeneration(const core::HfModelConfig& config,
                                const std::vector<std::vector<int64_t>>& prompts,
                                const GenerationOptions& o) {
  auto bad = [](const std::string& field, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(field, " ", why));
  };
  const int64_t vocab = config.vocab_size;
  auto in_vocab = [&](int64_t id) { return id >= 0 && id < vocab; };
  if (o.max_new_tokens <= 0)
    return bad("GenerationOptions.max_new_tokens", absl::StrCat(o.max_new_tokens, " must be positive"));
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature))
    return bad("GenerationOptions.temperature", absl::StrCat(o.temperature, " must be >= 0 (0: greedy)"));
  if (!(o.top_p > 0 && o.top_p <= 1))
    return bad("GenerationOptions.top_p", absl::StrCat(o.top_p, " must be in (0, 1]"));
  if (o.top_k < 0)
    return bad("GenerationOptions.top_k", absl::StrCat(o.top_k, " must be >= 0 (0: all tokens)"));
  if (!(o.min_p >= 0 && o.min_p <= 1))
    return bad("GenerationOptions.min_p", absl::StrCat(o.min_p, " must be in [0, 1]"));
  if (o.max_batch <= 0)
    return bad("GenerationOptions.max_batch", absl::StrCat(o.max_batch, " must be positive"));
  if (o.sequence_index_offset < 0) return bad("GenerationOptions.sequence_index_offset", "must be >= 0");
  if (!o.sequence_ids.empty() && o.sequence_ids.size() != prompts.size()) {
    return bad("GenerationOptions.sequence_ids",
               absl::StrCat(o.sequence_ids.size(), " ids for ", prompts.size(), " prompts"));
  }
  for (size_t i = 0; i < o.sequence_ids.size(); ++i) {
    if (o.sequence_ids[i] < 0)
      return bad(absl::StrCat("GenerationOptions.sequence_ids[", i, "]"), "must be >= 0");
  }
  if (!in_vocab(o.pad_id))
    return bad("GenerationOptions.pad_id",
               absl::StrCat(o.pad_id, " is outside the vocabulary [0, ", vocab, ")"));
  for (size_t i = 0; i < o.eos_ids.size(); ++i)
    if (!in_vocab(o.eos_ids[i]))
      return bad(absl::StrCat("GenerationOptions.eos_ids[", i, "]"),
                 absl::StrCat(o.eos_ids[i], " is outside the vocabulary [0, ", vocab, ")"));
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (prompts[i].empty()) return bad(absl::StrCat("prompts[", i, "]"), "is empty");
    for (size_t j = 0; j < prompts[i].size(); ++j)
      if (!in_vocab(prompts[i][j]))
        return bad(absl::StrCat("prompts[", i, "][", j, "]"),
                   absl::StrCat(prompts[i][j], " is outside the vocabulary [0, ", vocab, ")"));
  }
  return absl::OkStatus();
}

double SamplingUniform(uint64_t seed, int64_t sequence_index, int64_t token_index) {
  const uint64_t key = SplitMix64(SplitMix64(seed) ^ static_cast<uint64_t>(sequence_index));
  return static_cast<double>(SplitMix64(key ^ static_cast<uint64_t>(token_index)) >> 11) * 0x1.0p-53;
}

namespace {

// Which tokens the warpers keep, over logits sorted in descending order ([B, V]) and their softmax: each
// warper keeps a prefix of that order (the most likely token always), so the result is one prefix. Over the
// top_k prefix, the mass top_p compares is the plain cumulative sum there divided by the prefix's total, so
// no renormalised [B, V] copy is made, and the sampler's peak (after this, planner/memory_model.cc's sampling
// term) is the same whatever the settings.
torch::Tensor KeptPrefix(const torch::Tensor& sorted_logits, const torch::Tensor& probs,
                         const SamplingParams& p) {
  torch::Tensor keep;
  {
    const torch::Tensor cumulative = probs.cumsum(-1);
    // TopPLogitsWarper drops a token when the mass of all tokens at most as likely is <= 1 - top_p, i.e.
    // when the mass strictly more likely (before it in this order) is >= top_p; the first token stays.
    const torch::Tensor before = cumulative - probs;
    if (p.top_k > 0) {  // TopKLogitsWarper: logits below the k-th largest go (ties with it stay)
      const int64_t k = std::min<int64_t>(p.top_k, sorted_logits.size(1));
      keep = sorted_logits.ge(sorted_logits.narrow(1, k - 1, 1));
      const torch::Tensor top_k_mass = cumulative.gather(1, keep.sum(-1, /*keepdim=*/true) - 1);
      keep = keep.logical_and(before.lt(p.top_p * top_k_mass));
    } else {
      keep = before.lt(p.top_p);
    }
  }
  // MinPLogitsWarper: probabilities below min_p x the largest go (a common renormalisation cancels).
  if (p.min_p > 0) keep = keep.logical_and(probs.ge(p.min_p * probs.narrow(1, 0, 1)));
  return keep;
}

}  // namespace

torch::Tensor SampleTokens(const torch::Tensor& logits, const SamplingParams& params,
                           const torch::Tensor& uniforms) {
  TORCH_CHECK(logits.dim() == 2 && logits.size(1) > 0, "SampleTokens: logits must be [B, vocab], got ",
              logits.sizes());
  if (params.temperature == 0) return logits.argmax(-1);
  TORCH_CHECK(uniforms.dim() == 1 && uniforms.size(0) == logits.size(0), "SampleTokens: uniforms must be [",
              logits.size(0), "]");
  // Stable descending sort: equal logits keep ascending ids, so a nucleus of one is torch.argmax's pick.
  std::tuple<torch::Tensor, torch::Tensor> sorted =
      torch::sort(logits.to(torch::kFloat32) / params.temperature,
                  /*stable=*/true, /*dim=*/-1, /*descending=*/true);
  const torch::Tensor probs = torch::softmax(std::get<0>(sorted), -1).to(torch::kFloat64);
  const torch::Tensor keep = KeptPrefix(std::get<0>(sorted), probs, params);
  const torch::Tensor kept = probs * keep;
  const torch::Tensor cdf = kept.cumsum(-1);
  const torch::Tensor target =
      uniforms.to(cdf.device()).unsqueeze(1) * cdf.select(1, cdf.size(1) - 1).unsqueeze(1);
  // The first token whose cumulative mass exceeds the target: it has positive probability and is kept.
  const torch::Tensor last_kept = keep.sum(-1, /*keepdim=*/true) - 1;
  const torch::Tensor rank = torch::minimum(cdf.le(target).sum(-1, /*keepdim=*/true), last_kept);
  return std::get<1>(sorted).gather(1, rank).squeeze(1);
}

absl::StatusOr<GenerationResult> Generate(LlamaModelImpl& model,
                                          const std::vector<std::vector<int64_t>>& prompts,
                                          const GenerationOptions& options, KvCache* cache) {
  if (model.score) return absl::InvalidArgumentError("Generate: this is a reward model (no lm_head)");
  const core::HfModelConfig& config = model.config();
  if (absl::Status s = ValidateGeneration(config, prompts, options); !s.ok()) return s;
  size_t longest_prompt = 0;
  for (const std::vector<int64_t>& p : prompts) longest_prompt = std::max(longest_prompt, p.size());
  // The largest pass's capacity: what the fixed-shape modes' conditions grow with.
  const int64_t capacity = static_cast<int64_t>(longest_prompt) + options.max_new_tokens;
  GenerationOptions o = options;
  o.decode = ResolveDecodeMode(model, options.decode, capacity);
  if (absl::Status s = StaticDecodeSupported(model, o.decode, capacity); !s.ok()) return s;
  KvCache local;
  KvCache& kv = cache != nullptr ? *cache : local;
  GenerationResult result;
  result.completions.resize(prompts.size());
  result.stats.decode = o.decode;
  try {
    // No autograd at all, not only no graph: the operators skip autograd's dispatch (a host-bound decode
    // step's time is that dispatch; BENCHMARKS.md, "What a decode step dispatches"). Nothing made here
    // leaves Generate but token ids, and the KV cache is written only here.
    c10::InferenceMode inference;
    EvalModeScope eval(model);
    const torch::Tensor& w = model.model->embed_tokens->weight;
    const int64_t n = static_cast<int64_t>(prompts.size());
    for (int64_t first = 0; first < n; first += o.max_batch) {
      Pass pass;
      pass.first = first;
      pass.rows = std::min(o.max_batch, n - first);
      for (int64_t r = 0; r < pass.rows; ++r) {
        pass.next_position.push_back(static_cast<int64_t>(prompts[first + r].size()));
        pass.longest = std::max(pass.longest, pass.next_position.back());
      }
      pass.finished.assign(pass.rows, false);
      kv.Begin(config, pass.rows, pass.longest + o.max_new_tokens, w.scalar_type(), w.device());
      result.stats.peak_cache_bytes = std::max(result.stats.peak_cache_bytes, kv.bytes());
      ++result.stats.passes;
      RunPass(model, prompts, o, pass, kv, &result);
    }
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("Generate failed: ", e.what()));
  }
  return result;
}

}  // namespace zerofit::worker
