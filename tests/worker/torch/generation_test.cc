// Incremental decoding over a KvCache against the full forward, Generate against a float64 oracle that
// recomputes the whole sequence each step, the sampler against softmax frequencies, and the cache's size
// against KvCacheBytes for the sequences in flight; tiny configs (tests/support/tiny_llama_config.h).
#include "worker/torch/model/generation.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/hf_config.h"
#include "core/safetensors.h"
#include "nlohmann/json.hpp"
#include "tests/support/float_bounds.h"
#include "tests/support/tiny_llama_config.h"
#include "worker/torch/model/kv_cache.h"
#include "worker/torch/model/llama_model.h"
#include "worker/torch/model/static_decode.h"

namespace zerofit::worker {
namespace {

using test_support::Float32ForwardBound;
using test_support::TinyLlamaConfig;
using Prompts = std::vector<std::vector<int64_t>>;

// Larger-than-init random weights, so attention patterns, norms and biases all matter.
LlamaModel RandomModel(const core::HfModelConfig& config, uint64_t seed,
                       FusedKernels fused = FusedKernels::kCuda) {
  LlamaOptions options;
  options.fused_kernels = fused;
  LlamaModel model(config, options);
  torch::manual_seed(seed);
  torch::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) {
    torch::Tensor p = item.value();
    const std::string& name = item.key();
    const bool norm = name.size() > 11 && name.compare(name.size() - 11, 11, "norm.weight") == 0;
    p.copy_(norm ? 1 + 0.2 * torch::randn(p.sizes()) : 0.3 * torch::randn(p.sizes()));
  }
  model->eval();
  return model;
}

Prompts RandomPrompts(const std::vector<int64_t>& lengths, int64_t vocab, uint64_t seed) {
  torch::manual_seed(seed);
  Prompts out;
  for (int64_t len : lengths) {
    torch::Tensor t = torch::randint(vocab, {len}, torch::kInt64);
    out.emplace_back(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + len);
  }
  return out;
}

torch::Tensor Row(const std::vector<int64_t>& ids) { return torch::tensor(ids, torch::kInt64).unsqueeze(0); }

// Last-position logits of the full (training) forward over one unpadded sequence, [vocab] float64 on the
// host.
torch::Tensor FullLastLogits(LlamaModel& model, const std::vector<int64_t>& ids) {
  torch::NoGradGuard no_grad;
  const torch::Device device = model->model->embed_tokens->weight.device();
  return model->Logits(Row(ids).to(device))[0][static_cast<int64_t>(ids.size()) - 1]
      .to(torch::kCPU)
      .to(torch::kFloat64);
}

GenerationOptions Sampling(uint64_t seed) {
  GenerationOptions o;
  o.max_new_tokens = 10;
  o.temperature = 1.0;
  o.top_p = 0.9;
  o.seed = seed;
  o.max_batch = 4;
  return o;
}

struct Variant {
  std::string name;
  core::HfModelConfig config;
};

std::vector<Variant> Variants() {
  std::vector<Variant> v = {{"llama gqa 4/2", TinyLlamaConfig()},
                            {"qwen2 biases tied", TinyLlamaConfig("qwen2")}};
  core::HfModelConfig mqa = TinyLlamaConfig();
  mqa.num_key_value_heads = 1;
  v.push_back({"llama mqa 4/1", mqa});
  core::HfModelConfig mha = TinyLlamaConfig();
  mha.num_key_value_heads = 4;
  v.push_back({"llama mha 4/4", mha});
  core::HfModelConfig mistral = TinyLlamaConfig("mistral");
  mistral.sliding_window = 4;  // shorter than the sequences: the window masks keys
  v.push_back({"mistral window 4", mistral});
  return v;
}

// Left-padded prompts of different lengths prefilled in one step, then tokens appended one at a time by
// `mode` (eager: DecodeStep; static, cuda_graph: a StaticDecoder) on `device`: each row's logits equal the
// full forward over that row's real tokens alone. Both are float32 forwards of the same formulas, each
// within Float32ForwardBound of the exact result.
void ExpectDecodeLogitsEqualTheFullForward(DecodeMode mode, torch::Device device,
                                           FusedKernels fused = FusedKernels::kCuda) {
  for (const Variant& v : Variants()) {
    SCOPED_TRACE(v.name + " " + DecodeModeName(mode) + " fused kernels " + FusedKernelsName(fused));
    LlamaModel model = RandomModel(v.config, 1, fused);
    model->to(device);
    const Prompts prompts = RandomPrompts({3, 7, 5}, v.config.vocab_size, 2);
    const int64_t b = 3, longest = 7, steps = 4;
    torch::Tensor ids = torch::zeros({b, longest}, torch::kInt64);
    torch::Tensor pos = torch::full({b, longest}, -1, torch::kInt64);
    for (int64_t r = 0; r < b; ++r) {
      const int64_t len = static_cast<int64_t>(prompts[r].size());
      for (int64_t j = 0; j < len; ++j) {
        ids[r][longest - len + j] = prompts[r][j];
        pos[r][longest - len + j] = j;
      }
    }
    KvCache cache;
    cache.Begin(model->config(), b, longest + steps, torch::kFloat32, device);
    torch::NoGradGuard no_grad;
    Prompts seqs = prompts;
    torch::Tensor logits = model->DecodeStep(ids.to(device), pos.to(device), cache);
    std::unique_ptr<StaticDecoder> fixed;
    if (mode != DecodeMode::kEager) fixed = std::make_unique<StaticDecoder>(*model, cache, mode);
    for (int64_t step = 0;; ++step) {
      ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{b, v.config.vocab_size}));
      ASSERT_EQ(logits.scalar_type(), torch::kFloat32);
      const torch::Tensor got = logits.to(torch::kCPU).to(torch::kFloat64);
      for (int64_t r = 0; r < b; ++r) {
        const torch::Tensor ref = FullLastLogits(model, seqs[r]);
        const double max_ref = ref.abs().max().item<double>();
        const double diff = (got[r] - ref).abs().max().item<double>();
        EXPECT_LE(diff, 2 * Float32ForwardBound(v.config, static_cast<int64_t>(seqs[r].size()), max_ref))
            << "row " << r << " step " << step;
      }
      if (step == steps) break;
      torch::Tensor next = torch::randint(v.config.vocab_size, {b, 1}, torch::kInt64);
      torch::Tensor next_pos = torch::empty({b, 1}, torch::kInt64);
      for (int64_t r = 0; r < b; ++r) {
        next_pos[r][0] = static_cast<int64_t>(seqs[r].size());
        seqs[r].push_back(next[r][0].item<int64_t>());
      }
      logits = fixed ? fixed->Step(next, next_pos)
                     : model->DecodeStep(next.to(device), next_pos.to(device), cache);
    }
    EXPECT_EQ(cache.length(), longest + steps);
    // cuda_graph: the first step warmed up and recorded, every later one replayed.
    if (fixed) {
      EXPECT_EQ(fixed->replays(), mode == DecodeMode::kCudaGraph ? steps - 1 : 0);
    }
  }
}

TEST(GenerationTest, DecodeLogitsEqualTheFullForwardsLastPosition) {
  ExpectDecodeLogitsEqualTheFullForward(DecodeMode::kEager, torch::kCPU);
}

// The fixed-shape step (static_decode.h): every slot of the pass attended with the unwritten ones masked,
// the slot written at a device-side index, the query heads grouped over the kv heads.
TEST(GenerationTest, StaticDecodeLogitsEqualTheFullForwardsLastPosition) {
  ExpectDecodeLogitsEqualTheFullForward(DecodeMode::kStatic, torch::kCPU);
}

// The fused RMSNorm, SwiGLU and rotary nodes (fused_kernels.h, through their host references on the CPU) in
// the prefill and in each decoding step: the rotary embedding at each row's own positions ([batch, 1, T, d]
// angles), one table in the full forward.
TEST(GenerationTest, FusedKernelsDecodeLogitsEqualTheFullForwardsLastPosition) {
  ExpectDecodeLogitsEqualTheFullForward(DecodeMode::kEager, torch::kCPU, FusedKernels::kEverywhere);
  ExpectDecodeLogitsEqualTheFullForward(DecodeMode::kStatic, torch::kCPU, FusedKernels::kEverywhere);
}

// The same step recorded once as a CUDA graph and replayed (gpu label: skips without a CUDA device).
TEST(GenerationTest, GpuCudaGraphDecodeLogitsEqualTheFullForwardsLastPosition) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible to LibTorch";
  ExpectDecodeLogitsEqualTheFullForward(DecodeMode::kCudaGraph, torch::Device(torch::kCUDA, 0));
}

// The oracle: argmax of the full forward over the growing sequence, stopping at EOS. A step whose top two
// logits are closer than the float32 bound (RmsNorm rounds to float32 even in a float64 model) is a near-tie
// either path may break either way: the comparison of that prompt ends there.
struct OracleRun {
  std::vector<int64_t> tokens;
  int64_t decided = 0;  // leading tokens that are not near-ties
};

OracleRun GreedyOracle(LlamaModel& model, std::vector<int64_t> seq, int64_t max_new, int64_t eos) {
  OracleRun run;
  bool tie = false;
  for (int64_t i = 0; i < max_new; ++i) {
    const torch::Tensor logits = FullLastLogits(model, seq);
    const std::tuple<torch::Tensor, torch::Tensor> top = logits.topk(2);
    const double margin = (std::get<0>(top)[0] - std::get<0>(top)[1]).item<double>();
    tie = tie || margin <= 2 * Float32ForwardBound(model->config(), static_cast<int64_t>(seq.size()),
                                                   logits.abs().max().item<double>());
    const int64_t token = logits.argmax().item<int64_t>();
    run.tokens.push_back(token);
    if (!tie) ++run.decided;
    seq.push_back(token);
    if (token == eos) break;
  }
  return run;
}

TEST(GenerationTest, GreedyGenerateEqualsAFloat64FullForwardOracle) {
  for (const Variant& v : Variants()) {
    for (const DecodeMode mode : {DecodeMode::kEager, DecodeMode::kStatic}) {
      SCOPED_TRACE(v.name + " " + DecodeModeName(mode));
      LlamaModel model = RandomModel(v.config, 3);
      model->to(torch::kFloat64);
      const Prompts prompts = RandomPrompts({2, 6, 4, 5, 1}, v.config.vocab_size, 4);
      GenerationOptions o;
      o.max_new_tokens = 8;
      o.temperature = 0;
      o.decode = mode;
      o.max_batch = 2;  // three passes, each left-padded differently
      absl::StatusOr<GenerationResult> got = Generate(*model, prompts, o);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(got->stats.passes, 3);
      int64_t compared = 0;
      for (size_t i = 0; i < prompts.size(); ++i) {
        const OracleRun want = GreedyOracle(model, prompts[i], o.max_new_tokens, /*eos=*/-1);
        const Completion& c = got->completions[i];
        ASSERT_EQ(c.tokens.size(), want.tokens.size()) << "prompt " << i;
        EXPECT_TRUE(c.hit_max_new_tokens);
        for (int64_t j = 0; j < want.decided; ++j) EXPECT_EQ(c.tokens[j], want.tokens[j]) << "prompt " << i;
        compared += want.decided;
      }
      EXPECT_GE(compared, 30) << "too many near-ties for the comparison to mean anything";
      EXPECT_EQ(got->stats.tokens_generated, 5 * o.max_new_tokens);
    }
  }
}

// The fixed-shape step inside Generate: rows that finish at an EOS keep stepping as padding, passes reuse
// the cache (slots of an earlier pass are masked, not cleared), sampling draws the same uniforms. Every
// completion equals the eager one (a sampled or greedy token could differ only where the two paths' float32
// roundings straddle a decision boundary; these seeds have none, and the eager path's own correctness is
// the tests above). The cache holds exactly what the eager path's does.
TEST(GenerationTest, StaticDecodeGeneratesWhatEagerDoes) {
  for (const Variant& v : Variants()) {
    SCOPED_TRACE(v.name);
    LlamaModel model = RandomModel(v.config, 17);
    const Prompts prompts = RandomPrompts({4, 6, 3, 7, 2}, v.config.vocab_size, 18);
    for (const double temperature : {0.0, 1.0}) {
      GenerationOptions o = Sampling(5);
      o.temperature = temperature;
      o.max_batch = 2;
      o.eos_ids = {1, 2, 3};  // some rows finish early
      KvCache eager_cache, static_cache;
      o.decode = DecodeMode::kEager;
      absl::StatusOr<GenerationResult> eager = Generate(*model, prompts, o, &eager_cache);
      o.decode = DecodeMode::kStatic;
      absl::StatusOr<GenerationResult> fixed = Generate(*model, prompts, o, &static_cache);
      ASSERT_TRUE(eager.ok() && fixed.ok()) << eager.status() << fixed.status();
      for (size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_EQ(fixed->completions[i].tokens, eager->completions[i].tokens) << "prompt " << i;
        EXPECT_EQ(fixed->completions[i].hit_max_new_tokens, eager->completions[i].hit_max_new_tokens);
      }
      EXPECT_EQ(fixed->stats.tokens_generated, eager->stats.tokens_generated);
      EXPECT_NEAR(fixed->stats.entropy_sum, eager->stats.entropy_sum, 1e-4 * eager->stats.entropy_sum);
      EXPECT_EQ(fixed->stats.peak_cache_bytes, eager->stats.peak_cache_bytes);
      EXPECT_EQ(static_cache.allocations(), eager_cache.allocations());
      EXPECT_EQ(fixed->stats.graph_replays, 0);
    }
  }
}

// auto, the default: a graph where one can run (a CUDA model), eager elsewhere; the stats say which ran.
TEST(GenerationTest, AutoDecodesEagerOnTheCpu) {
  const core::HfModelConfig config = TinyLlamaConfig();
  LlamaModel model = RandomModel(config, 9);
  GenerationOptions o;
  EXPECT_EQ(o.decode, DecodeMode::kAuto);
  o.max_new_tokens = 4;
  o.temperature = 0;
  absl::StatusOr<GenerationResult> got = Generate(*model, RandomPrompts({3, 5}, config.vocab_size, 10), o);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->stats.decode, DecodeMode::kEager);
  EXPECT_EQ(got->stats.graph_replays, 0);
  EXPECT_EQ(ResolveDecodeMode(*model, DecodeMode::kAuto, 64), DecodeMode::kEager);
  for (const DecodeMode asked : {DecodeMode::kEager, DecodeMode::kStatic, DecodeMode::kCudaGraph})
    EXPECT_EQ(ResolveDecodeMode(*model, asked, 64), asked) << "only auto is resolved";
}

TEST(GenerationTest, GpuAutoDecodeReplaysAGraphOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible to LibTorch";
  const core::HfModelConfig config = TinyLlamaConfig();
  LlamaModel model = RandomModel(config, 9);
  model->to(torch::Device(torch::kCUDA, 0));
  GenerationOptions o;
  o.max_new_tokens = 6;
  o.temperature = 0;
  o.max_batch = 2;
  absl::StatusOr<GenerationResult> got = Generate(*model, RandomPrompts({3, 5}, config.vocab_size, 10), o);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->stats.decode, DecodeMode::kCudaGraph);
  // One pass: the prompt's step and the warm-up that records the graph run eagerly, the other 4 replay it.
  EXPECT_EQ(got->stats.graph_replays, o.max_new_tokens - 2);
}

TEST(GenerationTest, DecodeModesThatCannotRunAreErrorsNamingTheField) {
  const Prompts prompts = {{1, 2, 3}};
  GenerationOptions o;
  o.max_new_tokens = 4;
  auto error = [&](const core::HfModelConfig& config, DecodeMode mode) {
    LlamaModel model = RandomModel(config, 19);
    GenerationOptions m = o;
    m.decode = mode;
    absl::StatusOr<GenerationResult> r = Generate(*model, prompts, m);
    return r.ok() ? std::string() : std::string(r.status().message());
  };
  EXPECT_EQ(error(TinyLlamaConfig(), DecodeMode::kStatic), "");
  // This test runs on the CPU: a CUDA graph needs a CUDA device (and a CUDA build).
  EXPECT_NE(
      error(TinyLlamaConfig(), DecodeMode::kCudaGraph).find("GenerationOptions.decode: cuda_graph needs"),
      std::string::npos);
  core::HfModelConfig dynamic = TinyLlamaConfig();
  dynamic.max_position_embeddings = 5;
  dynamic.rope_scaling = core::RopeScaling{};
  dynamic.rope_scaling->type = "dynamic";
  dynamic.rope_scaling->factor = 2;
  EXPECT_NE(error(dynamic, DecodeMode::kStatic).find("GenerationOptions.decode: static needs rotary tables"),
            std::string::npos);
  EXPECT_EQ(error(dynamic, DecodeMode::kEager), "");
  core::HfModelConfig window = TinyLlamaConfig("qwen2");
  window.sliding_window = 5;
  EXPECT_NE(error(window, DecodeMode::kStatic).find("exceed the sliding window (5)"), std::string::npos);
  EXPECT_EQ(ParseDecodeMode("cuda_graph", "--decode").value(), DecodeMode::kCudaGraph);
  EXPECT_EQ(ParseDecodeMode("static", "--decode").value(), DecodeMode::kStatic);
  EXPECT_EQ(ParseDecodeMode("graph", "--decode").status().message(),
            "--decode: 'graph' is not a decode mode (eager, static, cuda_graph, auto)");
  EXPECT_EQ(ParseDecodeMode("auto", "--decode").value(), DecodeMode::kAuto);
}

TEST(GenerationTest, EosStopsASequenceAndKeepsTheEosToken) {
  const core::HfModelConfig config = TinyLlamaConfig();
  LlamaModel model = RandomModel(config, 5);
  const Prompts prompts = RandomPrompts({4, 6, 3}, config.vocab_size, 6);
  GenerationOptions o;
  o.max_new_tokens = 10;
  o.temperature = 0;
  absl::StatusOr<GenerationResult> free_run = Generate(*model, prompts, o);
  ASSERT_TRUE(free_run.ok()) << free_run.status();
  // An EOS the greedy path of prompt 0 produces after at least one other token.
  const std::vector<int64_t>& t0 = free_run->completions[0].tokens;
  size_t k = 1;
  while (k < t0.size() && std::find(t0.begin(), t0.begin() + k, t0[k]) != t0.begin() + k) ++k;
  ASSERT_LT(k, t0.size()) << "the greedy path repeats one token; pick another seed";
  o.eos_ids = {config.vocab_size - 1, t0[k]};
  absl::StatusOr<GenerationResult> stopped = Generate(*model, prompts, o);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_EQ(stopped->completions[0].tokens, std::vector<int64_t>(t0.begin(), t0.begin() + k + 1));
  EXPECT_FALSE(stopped->completions[0].hit_max_new_tokens);
  // The other rows: the free run cut after its first EOS, if any.
  for (size_t i = 1; i < prompts.size(); ++i) {
    const std::vector<int64_t>& f = free_run->completions[i].tokens;
    auto eos = std::find_first_of(f.begin(), f.end(), o.eos_ids.begin(), o.eos_ids.end());
    const std::vector<int64_t> want(f.begin(), eos == f.end() ? f.end() : eos + 1);
    EXPECT_EQ(stopped->completions[i].tokens, want) << "prompt " << i;
    EXPECT_EQ(stopped->completions[i].hit_max_new_tokens, eos == f.end());
  }
}

TEST(GenerationTest, SamplingIsReproducibleFromTheSeedAloneAndDependsOnIt) {
  const core::HfModelConfig config = TinyLlamaConfig("qwen2");
  LlamaModel model = RandomModel(config, 7);
  const Prompts prompts = RandomPrompts({3, 5, 2, 6, 4}, config.vocab_size, 8);
  auto tokens = [&](const GenerationOptions& o) {
    absl::StatusOr<GenerationResult> r = Generate(*model, prompts, o);
    EXPECT_TRUE(r.ok()) << r.status();
    std::vector<std::vector<int64_t>> out;
    for (const Completion& c : r->completions) out.push_back(c.tokens);
    return out;
  };
  const auto a = tokens(Sampling(11));
  EXPECT_EQ(tokens(Sampling(11)), a);
  EXPECT_NE(tokens(Sampling(12)), a);
  // Another pass layout draws the same uniforms per sequence: the same rollouts (a flip would need a uniform
  // within rounding of a boundary of the cumulative distribution).
  GenerationOptions one_at_a_time = Sampling(11);
  one_at_a_time.max_batch = 1;
  EXPECT_EQ(tokens(one_at_a_time), a);
  // Generate restores the training mode it found.
  model->train();
  tokens(Sampling(11));
  EXPECT_TRUE(model->is_training());
}

// A GRPO rank's prompts are not contiguous in the rollout: sequence_ids name each one's index, and a
// prompt samples what it would alone at that index.
TEST(GenerationTest, SequenceIdsGiveEachPromptTheSamplesOfItsIndex) {
  const core::HfModelConfig config = TinyLlamaConfig("llama");
  LlamaModel model = RandomModel(config, 3);
  const Prompts prompts = RandomPrompts({4, 6, 3}, config.vocab_size, 5);
  GenerationOptions o = Sampling(21);
  o.sequence_ids = {17, 2, 40};
  absl::StatusOr<GenerationResult> together = Generate(*model, prompts, o);
  ASSERT_TRUE(together.ok()) << together.status();
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerationOptions alone = Sampling(21);
    alone.sequence_index_offset = o.sequence_ids[i];
    absl::StatusOr<GenerationResult> r = Generate(*model, {prompts[i]}, alone);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->completions[0].tokens, together->completions[i].tokens) << "prompt " << i;
  }
  o.sequence_ids = {1, 2};
  const absl::Status bad = Generate(*model, prompts, o).status();
  EXPECT_NE(bad.message().find("GenerationOptions.sequence_ids 2 ids for 3 prompts"), std::string::npos)
      << bad;
}

// GenerationStats.entropy_sum: one new token per prompt is the entropy of softmax(last logits / T) of the
// full forward, summed over the prompts (float64 from the fp32 logits; the decode path's logits differ from
// the full forward's by rounding only); each completion's token carries its own (Completion::entropies,
// top_entropy_quantile's input).
TEST(GenerationTest, EntropyIsThatOfTheSamplingDistribution) {
  const core::HfModelConfig config = TinyLlamaConfig("llama");
  LlamaModel model = RandomModel(config, 9);
  const Prompts prompts = RandomPrompts({5, 3}, config.vocab_size, 10);
  for (const double temperature : {0.0, 0.7}) {
    GenerationOptions o = Sampling(4);
    o.temperature = temperature;
    o.max_new_tokens = 1;
    absl::StatusOr<GenerationResult> r = Generate(*model, prompts, o);
    ASSERT_TRUE(r.ok()) << r.status();
    double want = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      const torch::Tensor logp =
          torch::log_softmax(FullLastLogits(model, prompts[i]) / (temperature > 0 ? temperature : 1), 0);
      const double entropy = -(logp.exp() * logp).sum().item<double>();
      want += entropy;
      ASSERT_EQ(r->completions[i].entropies.size(), r->completions[i].tokens.size());
      EXPECT_NEAR(r->completions[i].entropies[0], entropy, 1e-4 * std::max(1.0, entropy)) << i;
    }
    EXPECT_NEAR(r->stats.entropy_sum, want, 1e-4 * std::max(1.0, want)) << "temperature " << temperature;
  }
}

// Greedy Generate equals transformers' generate(do_sample=False) on the same weights: each directory under
// tests/worker/torch/golden/generation/ holds config.json and model.safetensors of a seeded model and
// golden.json with transformers' completions, written by scripts/make_generation_golden.py (it needs torch
// and transformers, which Debian 12 does not package: regenerate on a machine that has them). Each prompt
// runs alone, float32, as the script ran it. A golden token is compared only while the float64 oracle of
// the same weights decides it (no near-tie within the float32 bound): past a near-tie, another machine's
// float32 sums may break it the other way, transformers' on the machine that wrote the golden included.
// Skipped, saying so, while no golden directory is in the tree.
TEST(GenerationTest, GreedyEqualsTransformersGoldens) {
  const std::filesystem::path root = ZEROFIT_GENERATION_GOLDEN_DIR;
  int checked = 0;
  for (const auto& entry : std::filesystem::exists(root) ? std::filesystem::directory_iterator(root)
                                                         : std::filesystem::directory_iterator()) {
    const std::string dir = entry.path().string();
    SCOPED_TRACE(dir);
    absl::StatusOr<core::HfModelConfig> config = core::LoadHfConfig(dir + "/config.json");
    ASSERT_TRUE(config.ok()) << config.status();
    absl::StatusOr<core::SafetensorsModel> weights = core::SafetensorsModel::Open(dir);
    ASSERT_TRUE(weights.ok()) << weights.status();
    LlamaModel model(*config);
    ASSERT_TRUE(model->LoadWeights(*weights).ok());
    model->eval();
    LlamaModel oracle(*config);
    ASSERT_TRUE(oracle->LoadWeights(*weights).ok());
    oracle->to(torch::kFloat64);
    oracle->eval();
    std::ifstream in(dir + "/golden.json");
    const nlohmann::json golden = nlohmann::json::parse(in);
    GenerationOptions o;
    o.temperature = 0;
    o.max_new_tokens = golden["max_new_tokens"].get<int64_t>();
    const nlohmann::json& eos = golden["eos_token_id"];
    if (eos.is_number()) o.eos_ids = {eos.get<int64_t>()};
    if (eos.is_array()) o.eos_ids = eos.get<std::vector<int64_t>>();
    for (const DecodeMode mode : {DecodeMode::kEager, DecodeMode::kStatic}) {
      SCOPED_TRACE(DecodeModeName(mode));
      o.decode = mode;
      int64_t decided = 0, total = 0;
      for (size_t i = 0; i < golden["prompts"].size(); ++i) {
        const std::vector<int64_t> prompt = golden["prompts"][i].get<std::vector<int64_t>>();
        const std::vector<int64_t> want = golden["completions"][i].get<std::vector<int64_t>>();
        absl::StatusOr<GenerationResult> r = Generate(*model, {prompt}, o);
        ASSERT_TRUE(r.ok()) << r.status();
        const OracleRun exact =
            GreedyOracle(oracle, prompt, o.max_new_tokens, o.eos_ids.empty() ? -1 : o.eos_ids[0]);
        const auto n = static_cast<size_t>(exact.decided);
        ASSERT_GE(want.size(), n) << "prompt " << i;
        ASSERT_GE(r->completions[0].tokens.size(), n) << "prompt " << i;
        const std::vector<int64_t> golden_decided(want.begin(), want.begin() + exact.decided);
        EXPECT_EQ(std::vector<int64_t>(exact.tokens.begin(), exact.tokens.begin() + exact.decided),
                  golden_decided)
            << "prompt " << i << ": transformers against the float64 oracle";
        EXPECT_EQ(std::vector<int64_t>(r->completions[0].tokens.begin(),
                                       r->completions[0].tokens.begin() + exact.decided),
                  golden_decided)
            << "prompt " << i << ": zerofit against transformers";
        if (exact.decided == static_cast<int64_t>(exact.tokens.size())) {
          EXPECT_EQ(r->completions[0].tokens, want)
              << "prompt " << i << ": no near-tie, so the whole completion";
        }
        decided += exact.decided;
        total += static_cast<int64_t>(want.size());
      }
      EXPECT_GE(2 * decided, total)
          << "over half the golden tokens are near-ties: regenerate with another seed";
    }
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no golden in " << root << ": run scripts/make_generation_goldens.sh";
}

TEST(GenerationTest, TinyTopPIsGreedy) {
  const core::HfModelConfig config = TinyLlamaConfig();
  LlamaModel model = RandomModel(config, 9);
  const Prompts prompts = RandomPrompts({3, 5, 2}, config.vocab_size, 10);
  GenerationOptions greedy = Sampling(1);
  greedy.temperature = 0;
  GenerationOptions nucleus = Sampling(1);
  nucleus.temperature = 0.7;
  nucleus.top_p = 1e-9;
  absl::StatusOr<GenerationResult> g = Generate(*model, prompts, greedy);
  absl::StatusOr<GenerationResult> n = Generate(*model, prompts, nucleus);
  ASSERT_TRUE(g.ok() && n.ok());
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(n->completions[i].tokens, g->completions[i].tokens);
}

// Frequencies of many draws from fixed logits against the exact distribution, each within 5 binomial
// standard deviations (a false failure has probability below 1e-5 per token).
void ExpectFrequencies(const torch::Tensor& logits, const SamplingParams& params,
                       const std::vector<double>& want) {
  const int64_t n = 20000, v = logits.size(0);
  torch::Tensor u = torch::empty({n}, torch::kFloat64);
  for (int64_t i = 0; i < n; ++i) u[i] = SamplingUniform(42, 0, i);
  const torch::Tensor drawn = SampleTokens(logits.unsqueeze(0).expand({n, v}), params, u);
  const torch::Tensor counts = torch::bincount(drawn, {}, v).to(torch::kFloat64);
  for (int64_t k = 0; k < v; ++k) {
    const double f = counts[k].item<double>() / n, p = want[k];
    if (p == 0) {
      EXPECT_EQ(f, 0) << "token " << k << " is outside the nucleus";
    } else {
      EXPECT_LE(std::abs(f - p), 5 * std::sqrt(p * (1 - p) / n)) << "token " << k;
    }
  }
}

TEST(GenerationTest, SamplerFrequenciesFollowSoftmaxAndTheNucleus) {
  const torch::Tensor logits = torch::tensor({1.0, 2.5, -0.5, 2.0, 0.0, 1.5}, torch::kFloat32);
  const double t = 0.8;
  std::vector<double> p(6);
  double z = 0;
  for (int k = 0; k < 6; ++k) z += std::exp(logits[k].item<double>() / t);
  for (int k = 0; k < 6; ++k) p[k] = std::exp(logits[k].item<double>() / t) / z;
  ExpectFrequencies(logits, {t, 1.0}, p);
  // Nucleus 0.7: tokens by probability 1 (p ~0.44), 3 (~0.24), 5 (~0.13)... keep while the mass before < 0.7.
  std::vector<double> kept(6, 0);
  const int order[] = {1, 3, 5, 0, 4, 2};
  double before = 0, mass = 0;
  for (int k : order) {
    if (before >= 0.7) break;
    kept[k] = p[k];
    before += p[k];
    mass += p[k];
  }
  for (double& q : kept) q /= mass;
  ASSERT_EQ(kept[0], 0);  // the nucleus really drops tokens
  ExpectFrequencies(logits, {t, 0.7}, kept);
}

// The exact distribution after transformers' warpers in their order, written out: softmax(logits / t),
// top_k's tokens (those tied with the k-th stay), top_p over them renormalised, min_p against the most
// likely; then renormalised.
std::vector<double> Warped(const std::vector<double>& logits, const SamplingParams& s) {
  const size_t v = logits.size();
  std::vector<size_t> order(v);
  for (size_t i = 0; i < v; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return logits[a] > logits[b]; });
  std::vector<double> p(v);
  double z = 0;
  for (size_t i = 0; i < v; ++i) z += std::exp(logits[i] / s.temperature);
  for (size_t i = 0; i < v; ++i) p[i] = std::exp(logits[i] / s.temperature) / z;
  std::vector<bool> keep(v, true);
  if (s.top_k > 0) {
    const double kth = logits[order[static_cast<size_t>(s.top_k) - 1]];
    for (size_t i = 0; i < v; ++i) keep[i] = logits[i] >= kth;
  }
  double k_mass = 0;
  for (size_t i = 0; i < v; ++i) k_mass += keep[i] ? p[i] : 0;
  double before = 0;
  std::vector<bool> in_p(v, false);
  for (size_t i : order) {
    if (!keep[i]) continue;
    in_p[i] = before < s.top_p;
    before += p[i] / k_mass;
  }
  std::vector<double> out(v, 0);
  double mass = 0;
  for (size_t i = 0; i < v; ++i) {
    if (keep[i] && in_p[i] && p[i] >= s.min_p * p[order[0]]) out[i] = p[i], mass += p[i];
  }
  for (double& q : out) q /= mass;
  return out;
}

// top_k and min_p (TRL's GRPOConfig and transformers' generate), alone and with top_p, against the exact
// distribution; each setting must drop tokens the one before kept, or it would test nothing.
TEST(GenerationTest, SamplerFrequenciesFollowTopKAndMinP) {
  const std::vector<double> l = {1.0, 2.5, -0.5, 2.0, 0.0, 1.5, 1.5};  // two tokens tied at 1.5
  const torch::Tensor logits = torch::tensor(l, torch::kFloat32);
  const SamplingParams settings[] = {
      {0.8, 1.0, 3, 0.0},   // 2.5, 2.0 and both 1.5s: four tokens (ties with the third stay)
      {0.8, 1.0, 2, 0.0},   // 2.5, 2.0
      {0.8, 1.0, 0, 0.3},   // at least 0.3 x the top probability
      {0.8, 0.8, 4, 0.0},   // top_p over the renormalised top 4
      {0.8, 0.9, 5, 0.25},  // all three
  };
  for (const SamplingParams& s : settings) {
    SCOPED_TRACE("top_k " + std::to_string(s.top_k) + " top_p " + std::to_string(s.top_p) + " min_p " +
                 std::to_string(s.min_p));
    const std::vector<double> want = Warped(l, s);
    const int dropped = static_cast<int>(std::count(want.begin(), want.end(), 0.0));
    EXPECT_GT(dropped, 0) << "the setting must drop tokens";
    ExpectFrequencies(logits, s, want);
  }
  const std::vector<double> top3 = Warped(l, settings[0]);
  EXPECT_EQ(std::count(top3.begin(), top3.end(), 0.0), 3) << "ties with the k-th token are kept";
}

TEST(GenerationTest, GreedyTiesGoToTheLowestIdAndUniformsAreInRange) {
  const torch::Tensor logits = torch::tensor({{0.5f, 2.0f, 2.0f, 1.0f}, {3.0f, 3.0f, 3.0f, 3.0f}});
  const torch::Tensor u = torch::tensor({0.3, 0.9}, torch::kFloat64);
  EXPECT_EQ(SampleTokens(logits, {0, 1}, u)[0].item<int64_t>(), 1);
  EXPECT_EQ(SampleTokens(logits, {0, 1}, u)[1].item<int64_t>(), 0);
  EXPECT_EQ(SampleTokens(logits, {1.0, 1e-6}, u)[1].item<int64_t>(), 0);
  EXPECT_EQ(SampleTokens(logits, {1.0, 1.0, 1}, u)[1].item<int64_t>(), 3) << "top_k 1 keeps the first's ties";
  EXPECT_EQ(SampleTokens(logits, {1.0, 1.0, 1}, u)[0].item<int64_t>(), 1) << "u 0.3 of the two tied at 2.0";
  EXPECT_EQ(SampleTokens(logits, {1.0, 1.0, 0, 1.0}, u)[1].item<int64_t>(), 3) << "min_p 1 keeps the ties";
  // Uniform over four equal tokens: u = 0.9 picks the last.
  EXPECT_EQ(SampleTokens(logits, {1.0, 1.0}, u)[1].item<int64_t>(), 3);
  for (int64_t i = 0; i < 1000; ++i) {
    const double x = SamplingUniform(1, i, 3);
    ASSERT_TRUE(x >= 0 && x < 1);
  }
  EXPECT_NE(SamplingUniform(1, 0, 0), SamplingUniform(1, 1, 0));
  EXPECT_NE(SamplingUniform(1, 0, 0), SamplingUniform(1, 0, 1));
  EXPECT_NE(SamplingUniform(1, 0, 0), SamplingUniform(2, 0, 0));
}

TEST(GenerationTest, KvCacheBytesFollowTheSequencesInFlight) {
  const core::HfModelConfig config = TinyLlamaConfig();  // 2 layers, 2 kv heads, head_dim 8
  LlamaModel model = RandomModel(config, 11);
  EXPECT_EQ(KvCacheBytes(model->config(), 5, 11, 4), 2 * 2 * 5 * 2 * 11 * 8 * 4);
  // 3 prompts x 4 samples = 12 sequences, 5 in flight: passes of 5, 5 and 2.
  Prompts prompts;
  for (const std::vector<int64_t>& p : RandomPrompts({6, 6, 6}, config.vocab_size, 12))
    for (int s = 0; s < 4; ++s) prompts.push_back(p);
  GenerationOptions o = Sampling(3);
  o.max_new_tokens = 5;
  o.max_batch = 5;
  KvCache cache;
  absl::StatusOr<GenerationResult> r = Generate(*model, prompts, o, &cache);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stats.passes, 3);
  const int64_t in_flight = KvCacheBytes(model->config(), 5, 6 + 5, 4);
  EXPECT_EQ(r->stats.peak_cache_bytes, in_flight);
  EXPECT_EQ(cache.bytes(), in_flight);
  EXPECT_EQ(cache.allocations(), 1) << "the passes of 5, 5 and 2 sequences reuse one allocation";
  EXPECT_LT(in_flight, KvCacheBytes(model->config(), 12, 6 + 5, 4));
  EXPECT_LT(in_flight, KvCacheBytes(model->config(), 5, config.max_position_embeddings, 4));
  // A later call whose passes are shorter reuses the cache; one that needs more capacity re-allocates to
  // exactly its pass.
  r = Generate(*model, RandomPrompts({2, 3}, config.vocab_size, 13), o, &cache);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(cache.allocations(), 1);
  r = Generate(*model, RandomPrompts({9, 4}, config.vocab_size, 14), o, &cache);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(cache.allocations(), 2);
  EXPECT_EQ(cache.bytes(), KvCacheBytes(model->config(), 2, 9 + 5, 4));
  EXPECT_EQ(r->stats.peak_cache_bytes, cache.bytes());
}

TEST(GenerationTest, KvCacheReusesWhatHoldsThePassAndReallocatesExactly) {
  const core::HfModelConfig c = LlamaModel(TinyLlamaConfig())->config();
  KvCache cache;
  cache.Begin(c, 2, 10, torch::kFloat32, torch::kCPU);
  EXPECT_EQ(cache.bytes(), KvCacheBytes(c, 2, 10, 4));
  cache.Begin(c, 1, 8, torch::kFloat32, torch::kCPU);
  EXPECT_EQ(cache.allocations(), 1);
  EXPECT_EQ(cache.batch(), 1);
  EXPECT_EQ(cache.capacity(), 8);
  EXPECT_EQ(cache.length(), 0);
  cache.Begin(c, 3, 8, torch::kFloat32, torch::kCPU);
  EXPECT_EQ(cache.allocations(), 2);
  EXPECT_EQ(cache.bytes(), KvCacheBytes(c, 3, 8, 4));
  cache.Begin(c, 3, 8, torch::kBFloat16, torch::kCPU);
  EXPECT_EQ(cache.bytes(), KvCacheBytes(c, 3, 8, 2));
  cache.Release();
  EXPECT_EQ(cache.bytes(), 0);
}

TEST(GenerationTest, BadOptionsAreErrorsNamingTheField) {
  LlamaModel model = RandomModel(TinyLlamaConfig(), 15);
  const Prompts ok = {{1, 2, 3}};
  auto error = [&](const Prompts& prompts, const GenerationOptions& o) {
    absl::StatusOr<GenerationResult> r = Generate(*model, prompts, o);
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : std::string(r.status().message());
  };
  GenerationOptions o;
  o.max_new_tokens = 4;
  ASSERT_TRUE(Generate(*model, ok, o).ok());
  GenerationOptions bad = o;
  bad.max_new_tokens = 0;
  EXPECT_NE(error(ok, bad).find("max_new_tokens"), std::string::npos);
  for (double top_p : {0.0, 1.5, -1.0, std::nan("")}) {
    bad = o;
    bad.top_p = top_p;
    EXPECT_NE(error(ok, bad).find("top_p"), std::string::npos) << top_p;
  }
  bad = o;
  bad.temperature = -0.1;
  EXPECT_NE(error(ok, bad).find("temperature"), std::string::npos);
  bad = o;
  bad.max_batch = 0;
  EXPECT_NE(error(ok, bad).find("max_batch"), std::string::npos);
  bad = o;
  bad.eos_ids = {3, 50};
  EXPECT_NE(error(ok, bad).find("eos_ids[1]"), std::string::npos);
  bad = o;
  bad.pad_id = -1;
  EXPECT_NE(error(ok, bad).find("pad_id"), std::string::npos);
  EXPECT_NE(error({{1, 2}, {}}, o).find("prompts[1]"), std::string::npos);
  EXPECT_NE(error({{1, 2}, {4, 50}}, o).find("prompts[1][1]"), std::string::npos);
  EXPECT_NE(error({{-3}}, o).find("prompts[0][0]"), std::string::npos);
}

}  // namespace
}  // namespace zerofit::worker
