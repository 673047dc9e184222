// Generation with LlamaModel (issue 32, groundwork for GRPO rollouts): incremental decoding over a KvCache
// in passes of at most max_batch sequences, greedy or sampled with temperature and top-p, each sequence
// stopping at an EOS id or after max_new_tokens.
//
// Passes: prompts are taken in order, max_batch at a time; a pass left-pads its prompts to its longest
// (padding has a negative position and is never attended to, transformers' position_ids = cumsum(mask) - 1
// for the real tokens) and begins the cache for exactly (its sequences, its longest prompt +
// max_new_tokens), reusing the cache's allocation when it holds that (kv_cache.h). Finished rows keep
// stepping on padding until the pass ends (or stop the pass when all are finished); a row never influences
// another.
//
// Sampling state: no generator object carries state between calls. The uniform that picks token j of
// sequence i is SamplingUniform(seed, sequence_index_offset + i, j), a counter-based hash, so the rollouts
// are a pure function of (weights, prompts, options): a resumed job that calls Generate again with the
// seed it recorded for that rollout step (e.g. base seed + step) gets the same samples, whatever its
// max_batch or pass layout (up to the rounding of logits, which a different padding may change in the last
// bits). torch::Generator was not used: its state advances with every draw of every row, so outputs would
// depend on batch composition and the device's generator kind.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/torch/model/kv_cache.h"
#include "worker/torch/model/llama_model.h"
#include "worker/torch/model/static_decode.h"

namespace zerofit::worker {

struct GenerationOptions {
  int64_t max_new_tokens = 0;  // > 0: tokens generated per sequence at most (EOS included)
  // 0: greedy (argmax, ties to the lowest id as torch.argmax); > 0: sample from softmax(logits /
  // temperature).
  double temperature = 1.0;
  // Nucleus sampling, in (0, 1]: keep the smallest set of most likely tokens whose probability sums to
  // >= top_p (at least one), as transformers' TopPLogitsWarper. 1: no filtering. Ignored when greedy.
  double top_p = 1.0;
  // > 0: only the top_k most likely tokens (and those tied with the last), as TopKLogitsWarper; 0: all.
  int64_t top_k = 0;
  // In [0, 1]: only tokens at least min_p times as likely as the most likely one, as MinPLogitsWarper.
  double min_p = 0.0;
  std::vector<int64_t> eos_ids;  // a sequence stops after producing any of these (kept in its completion)
  int64_t pad_id = 0;            // fills left padding and finished rows; never attended to
  uint64_t seed = 0;             // sampling seed (see the header comment)
  int64_t sequence_index_offset = 0;  // index of prompts[0] in the whole rollout (e.g. a rank's shard start)
  // When non-empty (one per prompt): each prompt's own sequence index, in place of the offset. A GRPO rank
  // whose prompts are not contiguous in the rollout (prompt p's sample g is sequence p x G + g) uses it.
  std::vector<int64_t> sequence_ids;
  int64_t max_batch = 8;  // sequences in flight per pass
  // How the steps after the prompt run (static_decode.h): eager (DecodeStep), static (the fixed-shape step,
  // eagerly), cuda_graph (the fixed-shape step recorded once a pass and replayed), auto (cuda_graph where it
  // can run, else eager: ResolveDecodeMode). The prompt's step is always eager. The tokens are the same up to
  // rounding.
  DecodeMode decode = DecodeMode::kAuto;
};

struct Completion {
  std::vector<int64_t> tokens;      // generated tokens, ending at the first EOS if one came
  bool hit_max_new_tokens = false;  // max_new_tokens generated without an EOS
  // Per token: the entropy (nats) of the distribution it was drawn from, softmax(logits / temperature)
  // before top-k/top-p/min-p (temperature 1 when greedy), as GenerationStats::entropy_sum adds them.
  std::vector<float> entropies;
};

struct GenerationStats {
  int64_t tokens_generated = 0;  // sum of the completions' lengths
  int64_t passes = 0;
  int64_t peak_cache_bytes = 0;  // largest KvCache::bytes() during the call
  // Sum over the generated tokens of the entropy (nats) of the distribution each was drawn from,
  // softmax(logits / temperature) before top-p (temperature 1 when greedy): GRPO's entropy metric.
  double entropy_sum = 0;
  int64_t graph_replays = 0;               // decode steps that replayed a CUDA graph (DecodeMode::kCudaGraph)
  DecodeMode decode = DecodeMode::kEager;  // the mode the call's passes ran (options.decode resolved)
};

struct GenerationResult {
  std::vector<Completion> completions;  // one per prompt, in order
  GenerationStats stats;
};

// Checks `options` and `prompts` against `config` (vocab); errors name the field (GenerationOptions.top_p,
// prompts[3], prompts[1][4], ...). Generate also checks `decode` against the model (StaticDecodeSupported).
absl::Status ValidateGeneration(const core::HfModelConfig& config,
                                const std::vector<std::vector<int64_t>>& prompts,
                                const GenerationOptions& options);

// The uniform in [0, 1) that draws token `token_index` of sequence `sequence_index` under `seed`
// (SplitMix64 over the three counters, 53 bits).
double SamplingUniform(uint64_t seed, int64_t sequence_index, int64_t token_index);

// What SampleTokens draws from: softmax(logits / temperature) cut as transformers' warpers cut it, in
// their order (GenerationMixin._get_logits_warper): top_k, then top_p over what top_k left (renormalised),
// then min_p. The fields mean what GenerationOptions' of the same names do.
struct SamplingParams {
  double temperature = 1.0;  // 0: greedy
  double top_p = 1.0;
  int64_t top_k = 0;
  double min_p = 0.0;
};

// One token per row from logits [B, vocab] (fp32, any device): argmax when temperature == 0; otherwise the
// token whose interval of the cumulative distribution of softmax(logits / temperature), restricted to the
// tokens `params` keep and renormalised, holds uniforms[b] ([B] float64, in [0, 1)). Tokens are ordered by
// descending logit, ties by ascending id. Returns [B] int64 on the logits' device.
torch::Tensor SampleTokens(const torch::Tensor& logits, const SamplingParams& params,
                           const torch::Tensor& uniforms);

// Generates a completion for every prompt (see the header comment). `cache` may be null (a cache local to
// the call); pass one to keep its allocation across calls. Runs without grad and with the model in eval
// mode (LoRA dropout off), restoring its mode after. Errors: ValidateGeneration's, a reward model, and
// failures inside LibTorch as Internal.
absl::StatusOr<GenerationResult> Generate(LlamaModelImpl& model,
                                          const std::vector<std::vector<int64_t>>& prompts,
                                          const GenerationOptions& options, KvCache* cache = nullptr);

}  // namespace zerofit::worker
