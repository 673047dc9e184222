// The planner's formulas against hand-computed values for a small model, the presets' published parameter
// counts, hardware parsing, model loading from a checkpoint directory, and the search's contract.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <vector>

#include "core/safetensors.h"
#include "planner/memory_model.h"
#include "planner/model_shape.h"
#include "planner/plan_report.h"
#include "planner/search.h"
#include "tests/planner/small_model.h"

namespace zerofit::planner {
namespace {

using testmodels::Small;

ActivationEstimate Activations(const ModelShape& m, int64_t rows, int64_t seq_len, int element_bytes,
                               bool checkpointing, int64_t lora_rank, bool policy_head,
                               WorkerKernels kernels = WorkerKernels::kLibTorch1Eager) {
  ActivationJob job;
  job.rows = rows;
  job.seq_len = seq_len;
  job.element_bytes = element_bytes;
  job.checkpointing = checkpointing;
  job.lora_rank = lora_rank;
  job.policy_head = policy_head;
  job.kernels = kernels;
  return EstimateActivations(m, job);
}

TEST(ModelShapeTest, PartsOfASmallModelByHand) {
  const ModelShape m = Small();
  // q 8x8, k and v 4x8 each, o 8x8, gate/up/down 3 x 8x16, two norms of 8.
  EXPECT_EQ(m.LayerParameters(), 64 + 32 + 32 + 64 + 384 + 16);
  EXPECT_EQ(m.BackboneParameters(), 80 + 2 * 592 + 8);
  EXPECT_EQ(m.PolicyParameters(), 1352);
  EXPECT_EQ(m.RewardModelParameters(), 1280);
  // LoRA r=2 on q (8->8), k (8->4), v (8->4), o (8->8): r x (in + out) each, two layers.
  EXPECT_EQ(m.LoraParameters(2), 2 * 2 * ((8 + 8) + (8 + 4) + (8 + 4) + (8 + 8)));
  auto sum = [](const std::vector<int64_t>& v) { return std::accumulate(v.begin(), v.end(), int64_t{0}); };
  EXPECT_EQ(sum(m.TrainableTensors(false, 0)), m.PolicyParameters());
  EXPECT_EQ(sum(m.TrainableTensors(true, 0)), m.RewardModelParameters());
  EXPECT_EQ(sum(m.TrainableTensors(false, 2)), m.LoraParameters(2));
  EXPECT_EQ(sum(m.TrainableTensors(true, 2)), m.LoraParameters(2) + 8);
  EXPECT_EQ(m.LargestTensor(), 8 * 16);
}

TEST(ModelShapeTest, PresetsMatchThePublishedParameterCounts) {
  const std::pair<const char*, int64_t> expected[] = {{"Mistral-7B", 7241732096},
                                                      {"Llama-2-7B", 6738415616},
                                                      {"Llama-3-8B", 8030261248},
                                                      {"Qwen2.5-0.5B", 494032768},
                                                      {"Qwen2.5-7B", 7615616512}};
  for (const auto& [name, count] : expected) {
    auto m = LoadModelShape(name);
    ASSERT_TRUE(m.ok()) << name << ": " << m.status();
    EXPECT_EQ(m->parameter_count, count) << name;
    EXPECT_EQ(m->source, "preset");
  }
  auto lower = LoadModelShape("mistral-7b");
  ASSERT_TRUE(lower.ok());
  EXPECT_EQ(lower->name, "Mistral-7B");
  auto missing = LoadModelShape("Llama-9-1T");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("--model 'Llama-9-1T'"), std::string::npos);
  EXPECT_NE(missing.status().message().find("Mistral-7B"), std::string::npos);
}

TEST(ModelShapeTest, ACheckpointDirectoryIsCountedFromItsSafetensorsHeaders) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "zerofit_planner_model";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "vocab_size": 10, "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
    "num_attention_heads": 2, "num_key_value_heads": 1, "tie_word_embeddings": true})";
  auto shape = LoadModelShape(dir.string());
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->source, "config.json");
  const int64_t total = shape->parameter_count;  // 80 + 592 + 8 = 680 (tied)
  EXPECT_EQ(total, 680);
  // Weights whose headers add up to the config's count: the headers become the source.
  std::vector<float> a(600, 0.0f), b(80, 0.0f);
  ASSERT_TRUE(core::WriteSafetensors(
                  (dir / "model.safetensors").string(),
                  {{"a", core::StDType::kF32, {600}, a.data()}, {"b", core::StDType::kF32, {80}, b.data()}})
                  .ok());
  shape = LoadModelShape(dir.string());
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->source, "safetensors headers (2 tensors)");
  // Headers that disagree with config.json are an error naming both counts.
  ASSERT_TRUE(core::WriteSafetensors((dir / "model.safetensors").string(),
                                     {{"a", core::StDType::kF32, {600}, a.data()}})
                  .ok());
  shape = LoadModelShape(dir.string());
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.status().message().find("600"), std::string::npos) << shape.status();
  EXPECT_NE(shape.status().message().find("680"), std::string::npos) << shape.status();
  // A config.json with a bad field is reported with the file and the field.
  std::ofstream(dir / "config.json") << R"({"vocab_size": 10, "hidden_size": 8, "intermediate_size": 16,
    "num_hidden_layers": 1, "num_attention_heads": 3, "num_key_value_heads": 2})";
  shape = LoadModelShape(dir.string());
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.status().message().find("config.json"), std::string::npos) << shape.status();
  std::filesystem::remove_all(dir);
}

TEST(MemoryModelTest, LayerActivationsByHand) {
  const ModelShape m = Small();
  constexpr WorkerKernels kOne = WorkerKernels::kLibTorch1Eager;
  // Lean pieces (no checkpointing), fp32: 16 H (each norm's input and output) + 8 I (gate and up; the
  // product is recomputed) + 16 (heads x head_dim) + 4 heads x T.
  EXPECT_DOUBLE_EQ(LayerSavedBytesPerToken(m, 6, 4, 0, kOne, false), 16 * 8 + 8 * 16 + 16 * 8 + 4 * 2 * 6);
  // bf16: 8 H + 4 I + 8 q + 6 heads x T.
  EXPECT_DOUBLE_EQ(LayerSavedBytesPerToken(m, 6, 2, 0, kOne, false), 8 * 8 + 4 * 16 + 8 * 8 + 6 * 2 * 6);
  // LoRA r=2, fp32: 12 H + 8 I + 16 q + 4 heads x T + 16 r.
  EXPECT_DOUBLE_EQ(LayerSavedBytesPerToken(m, 6, 4, 2, kOne, false),
                   12 * 8 + 8 * 16 + 16 * 8 + 4 * 2 * 6 + 16 * 2);
  // A checkpointed layer recomputes the plain pieces. fp32: 32 H + 16 I + 16 (heads x head_dim) + 4 heads x
  // T + 8.
  EXPECT_DOUBLE_EQ(LayerSavedBytesPerToken(m, 6, 4, 0, kOne, true),
                   32 * 8 + 16 * 16 + 16 * 8 + 4 * 2 * 6 + 8);
  // bf16: 24 H + 8 I + 8 q + 6 heads x T + 8.
  EXPECT_DOUBLE_EQ(LayerSavedBytesPerToken(m, 6, 2, 0, kOne, true), 24 * 8 + 8 * 16 + 8 * 8 + 6 * 2 * 6 + 8);
  // LoRA r=2, fp32: 20 H + 12 I + 16 q + 4 heads x T + 8 + 16 r.
  EXPECT_DOUBLE_EQ(LayerSavedBytesPerToken(m, 6, 4, 2, kOne, true),
                   20 * 8 + 12 * 16 + 16 * 8 + 4 * 2 * 6 + 8 + 16 * 2);
}

TEST(MemoryModelTest, TheGpuBuildKeepsNoAttentionRow) {
  const ModelShape m = Small();  // H 8, I 16, q 2 x 4 = 8, kv 1 x 4 = 4, 2 heads
  constexpr WorkerKernels kGpu = WorkerKernels::kLibTorch2Sdpa;
  // LibTorch 2.x and SDPA, bf16, lean pieces: q and the attention output (2 x 2 B x 8), k and v unrepeated
  // (2 x 2 B x 4) and an fp32 logsumexp per head (4 B x 2) instead of the [heads, T] probabilities: nothing
  // grows with T.
  const double bf16 = 8 * 8 + 4 * 16 + 4 * 8 + 4 * 4 + 4 * 2;
  EXPECT_DOUBLE_EQ(LayerSavedBytesPerToken(m, 6, 2, 0, kGpu, false), bf16);
  EXPECT_DOUBLE_EQ(LayerSavedBytesPerToken(m, 4096, 2, 0, kGpu, false), bf16);
  // Plain pieces (checkpointed): also 8 B per hidden element less than 1.x (mean()'s fp32 input, once per
  // RMSNorm).
  EXPECT_DOUBLE_EQ(LayerSavedBytesPerToken(m, 6, 2, 0, kGpu, true),
                   16 * 8 + 8 * 16 + 4 * 8 + 4 * 4 + 4 * 2 + 8);
  // LoRA r=2, fp32, lean: 12 H + 8 I + 8 q + 8 kv + 4 heads + 16 r.
  EXPECT_DOUBLE_EQ(LayerSavedBytesPerToken(m, 6, 4, 2, kGpu, false),
                   12 * 8 + 8 * 16 + 8 * 8 + 8 * 4 + 4 * 2 + 16 * 2);
  // A reward model, 3 rows of 6 tokens: per token, each layer's difference; the lean final norm is the same.
  const double one_layer = LayerSavedBytesPerToken(m, 6, 2, 0, WorkerKernels::kLibTorch1Eager, false);
  const ActivationEstimate one = Activations(m, 3, 6, 2, false, 0, false, WorkerKernels::kLibTorch1Eager);
  const ActivationEstimate two = Activations(m, 3, 6, 2, false, 0, false, kGpu);
  EXPECT_NEAR(one.saved - two.saved, 18 * 2 * (one_layer - bf16), 1e-9);
}

TEST(MemoryModelTest, ActivationPeakByHand) {
  ModelShape m = Small();
  m.vocab_size = 100;  // a vocabulary large enough for the log-prob head to set the peak
  // 3 sequences of 6 tokens, fp32, policy head, no checkpointing: lean layers (LayerActivationsByHand).
  const double n = 18, layer = 432;
  const double fixed = 2 * 6 * 4 * 4 + 36;  // rope cos/sin + bool mask
  // Final norm (its input and output); the chunked log-probs keep an fp32 logsumexp and an int64 target for
  // 5 of 6 positions.
  const double head = 2 * 4 * 8, logits = 12 * 5.0 / 6;
  const double saved = n * (2 * layer + head + logits) + fixed;
  ActivationEstimate e = Activations(m, 3, 6, 4, false, 0, true);
  EXPECT_NEAR(e.saved, saved, 1e-9);
  // Loss head forward: one chunk (all 15 predicted rows fit in 256 MiB) of fp32 logits and logsumexp's fp32
  // temporary, with the head's copy of the 15 hidden states beside the norm's output. (Its backward, one fp32
  // chunk, the fp32 weight gradient [V, H] and the hidden states' gradient, 6000 + 3200 + 480 B, is smaller.)
  EXPECT_NEAR(e.peak, saved + 15 * 4 * 8 + 8 * 15 * 100, 1e-9);
  EXPECT_EQ(e.phase, "loss-head forward");
  // A vocabulary of 2^26: one row's fp32 logits take the whole 256 MiB, so a chunk is one row, not 15, and
  // the backward (one row's logits, the weight gradient, the hidden states' gradient) sets the peak.
  m.vocab_size = int64_t{1} << 26;
  e = Activations(m, 3, 6, 4, false, 0, true);
  EXPECT_NEAR(e.peak - e.saved, 1.0 * 4 * m.vocab_size + 4.0 * m.vocab_size * 8 + 15 * 4 * 8, 1e-3);
  EXPECT_EQ(e.phase, "loss-head backward");
  // bf16 with one chunk: the backward's chunk (bf16 logits and gradient cast beside the fp32 buffer, 6 B per
  // entry), the weight's gradient as that chunk's bf16 GEMM (2 B per weight) and the hidden states' gradient
  // come to 15 x 100 x 6 + 2 x 100 x 8 + 15 x 2 x 8 = 10840 B, under the forward's 8 B per chunk entry and
  // the hidden copy...
  m.vocab_size = 100;
  e = Activations(m, 3, 6, 2, false, 0, true);
  EXPECT_NEAR(e.peak - e.saved, 8 * 15 * 100 + 15 * 2 * 8, 1e-9);
  EXPECT_EQ(e.phase, "loss-head forward");
  // ... with several chunks the weight's gradient is an fp32 accumulator plus a bf16 product (4 + 2 B per
  // weight), and the backward sets the peak.
  m.vocab_size = int64_t{1} << 26;
  e = Activations(m, 3, 6, 2, false, 0, true);
  EXPECT_NEAR(e.peak - e.saved, 6.0 * m.vocab_size + 6.0 * m.vocab_size * 8 + 15 * 2 * 8, 1e-3);
  EXPECT_EQ(e.phase, "loss-head backward");
  m = Small();
  // A reward model (score head): no logits; the decoder layer's backward sets the peak: the lean MLP's,
  // max(4 (3I + 2H), 24H) = 256 bytes per token (the attention's, 8 B x 2 heads x 6 + 24 H - 4 (2I + 2H) =
  // 64, is lower).
  e = Activations(m, 3, 6, 4, false, 0, false);
  EXPECT_NEAR(e.saved, n * (2 * layer + head) + fixed, 1e-9);
  EXPECT_NEAR(e.peak, e.saved + n * 256, 1e-9);
  EXPECT_EQ(e.phase, "decoder layer backward");
  // Checkpointing keeps one hidden state per layer and the RNG state; backward recomputes one layer with the
  // plain pieces (696 B a token, the plain final norm 16 H, max(4 (2I - 3H), 8H) = 64 B a token).
  e = Activations(m, 3, 6, 4, true, 0, false);
  const double ck_saved = n * (2 * 4 * 8 + 16 * 8) + fixed + 2 * 5056;
  EXPECT_NEAR(e.saved, ck_saved, 1e-9);
  EXPECT_NEAR(e.peak, ck_saved + n * (696 + 64 + 4 * 8), 1e-9);
}

// A recomputed layer's eager attention backward: two [heads, T] rows (fp32 8 B per head and key) beside
// all the layer keeps but its MLP's intermediate-wide and its second norm's hidden-wide tensors (16 I + 16 H
// in fp32). Past ~28 tokens on this model it is larger than the MLP's backward (64 B a token); SDPA has no
// such rows.
TEST(MemoryModelTest, ARecomputedLayersEagerAttentionSetsTheCheckpointedPeakAtLength) {
  const ModelShape m = Small();  // H 8, I 16, q 8, 2 heads
  const ActivationEstimate e = Activations(m, 1, 64, 4, true, 0, false);
  const double layer_full = 32 * 8 + 16 * 16 + 16 * 8 + 4 * 2 * 64 + 8;
  EXPECT_NEAR(e.peak - e.saved, 64 * (layer_full + (8 * 2 * 64 - (16 * 16 + 16 * 8)) + 4 * 8), 1e-9);
  EXPECT_EQ(e.phase, "recomputed layer backward");
  const ActivationEstimate sdpa = Activations(m, 1, 64, 4, true, 0, false, WorkerKernels::kLibTorch2Sdpa);
  EXPECT_NEAR(sdpa.peak - sdpa.saved,
              64 * (LayerSavedBytesPerToken(m, 64, 4, 0, WorkerKernels::kLibTorch2Sdpa, true) + 64 + 4 * 8),
              1e-9);
}

// The fused pieces (Hardware::fused_pieces, the GPU workers): each norm keeps one fp32 reciprocal RMS a token
// beside what the lean pieces keep (two a layer, one for the final norm), and a layer's backward holds no
// fp32 norm arithmetic: the MLP's a (3I + 2H) (planner_validation_test's fused rows). A recomputed
// (checkpointed) fused layer keeps the lean tensors, the MLP's product and the reciprocal RMS values; its
// backward a (2I - 2H) beside them, and one weight's gradient (I x H x a).
TEST(MemoryModelTest, TheFusedPiecesKeepAFloatANormAndTheirBackwardHoldsTheMlpsGradients) {
  const ModelShape m = Small();  // H 8, I 16
  for (int a : {2, 4}) {
    ActivationJob job;
    job.rows = 3;
    job.seq_len = 6;
    job.element_bytes = a;
    const ActivationEstimate lean = EstimateActivations(m, job);
    job.fused_pieces = true;
    const ActivationEstimate fused = EstimateActivations(m, job);
    EXPECT_NEAR(fused.saved - lean.saved, 18 * (2 * 8 + 4), 1e-9) << a;
    EXPECT_NEAR(fused.peak - fused.saved, 18 * a * (3 * 16 + 2 * 8), 1e-9) << a;
    EXPECT_EQ(fused.phase, "decoder layer backward");
    job.checkpointing = true;
    const ActivationEstimate ckpt = EstimateActivations(m, job);
    // H 8, I 16, q 8, 2 heads, T 6: 16 H + 12 I + 16 q + 4 x 2 x 6 + 8 (fp32), 8 H + 6 I + 8 q + 6 x 2 x 6 +
    // 8 (bf16); the backward a (2I - 2H) = 16 a (the attention's rows, 8 or 6 B x 2 x 6 less a (3I + 2H), are
    // fewer); the incoming gradient a H.
    const double layer =
        a == 4 ? 16 * 8 + 12 * 16 + 16 * 8 + 4 * 2 * 6 + 8 : 8 * 8 + 6 * 16 + 8 * 8 + 6 * 2 * 6 + 8;
    EXPECT_NEAR(ckpt.peak - ckpt.saved, 18 * (layer + 16 * a + a * 8) + a * 8 * 16, 1e-9) << a;
    EXPECT_EQ(ckpt.phase, "recomputed layer backward");
  }
  EXPECT_TRUE(ParseHardware("h200-141")->fused_pieces);
  EXPECT_FALSE(ParseHardware("cpu")->fused_pieces);
}

// The bytes of the device item `name` of an estimate (0 when it has none).
double DeviceItem(const MemoryEstimate& e, const std::string& name) {
  for (const MemoryItem& i : e.device)
    if (i.name == name) return i.bytes;
  return 0.0;
}

TEST(MemoryModelTest, OptimizerStateOfASevenBillionModelIsAbout84GbNot28) {
  auto m = LoadModelShape("Mistral-7B");
  ASSERT_TRUE(m.ok());
  auto hw = ParseHardware("8x64GB");
  ASSERT_TRUE(hw.ok());
  Workload w;
  w.task = Task::kReward;
  w.seq_len = 512;
  Strategy s;
  s.zero_stage = 0;
  const auto item = DeviceItem;
  const double p = static_cast<double>(m->RewardModelParameters());
  MemoryEstimate e = EstimateMemory(*m, w, s, *hw, 8);
  // fp32 master + exp_avg + exp_avg_sq: 12 bytes per parameter (~85 GB for 7.1e9), unsharded at stage 0.
  EXPECT_NEAR(item(e, "optimizer state"), 12 * p, 1e-4 * 12 * p);
  EXPECT_GT(item(e, "optimizer state"), 84e9);
  EXPECT_NEAR(item(e, "parameters"), 2 * p, 1e-4 * 2 * p);
  EXPECT_NEAR(item(e, "gradients"), 2 * p, 1e-4 * 2 * p);
  // ZeRO-2 on 8 GPUs: 16 bytes per parameter (with the fp32 gradient shard) divided by 8 ...
  s.zero_stage = 2;
  s.gradient_accumulation = 2;
  e = EstimateMemory(*m, w, s, *hw, 8);
  EXPECT_NEAR(item(e, "optimizer state"), 16 * p / 8, 1e-3 * 16 * p / 8);
  EXPECT_EQ(item(e, "gradients"), 0.0);
  // ... and 12 with one micro-batch a step: nothing to accumulate, AdamW reads the landing shard.
  s.gradient_accumulation = 1;
  e = EstimateMemory(*m, w, s, *hw, 8);
  EXPECT_NEAR(item(e, "optimizer state"), 12 * p / 8, 1e-3 * 12 * p / 8);
  // Offload: the state leaves the GPU for pinned host memory, 8 GPUs' worth per node.
  s.offload = true;
  e = EstimateMemory(*m, w, s, *hw, 8);
  EXPECT_EQ(item(e, "optimizer state"), 0.0);
  ASSERT_FALSE(e.host.empty());
  EXPECT_NEAR(e.host[0].bytes, 8 * (16 * p / 8 + 2 * 2 * p / 8), 1e-3 * e.host[0].bytes);
  const double no_delay = e.host_bytes;
  // The delayed update adds a second fp32 gradient shard and bf16 staging per GPU (OffloadPipeline with
  // gradient_buffers 2: offload_unit_test checks its host_bytes() against the same 6 B a shard element).
  w.delayed_update = true;
  e = EstimateMemory(*m, w, s, *hw, 8);
  ASSERT_EQ(e.host.size(), 2u);
  EXPECT_EQ(e.host[1].name, "second gradient buffer (pinned)");
  EXPECT_NEAR(e.host[1].bytes, 8 * 6 * p / 8, 1e-3 * 6 * p);
  EXPECT_NEAR(e.host_bytes - no_delay, 8 * 6 * p / 8, 1e-3 * 6 * p);
  w.delayed_update = false;
  // The runtime terms of a GPU profile are present.
  EXPECT_GT(item(e, "CUDA context + cuDNN workspace"), 0.0);
  EXPECT_GT(item(e, "NCCL buffers"), 0.0);
  EXPECT_GT(item(e, "allocator fragmentation"), 0.0);
}

// 8-bit moments (training.optim: adamw_8bit): a byte each of m and v and a scale each per 256 elements,
// the fp32 master and accumulator as before. Mistral-7B has no tensor under 4096 elements (its norms have
// exactly 4096): ZeRO-2 on 8 GPUs keeps (8 + 2 + 8/256) B a shard element instead of 16.
TEST(MemoryModelTest, EightBitMomentsOfASevenBillionModel) {
  auto m = LoadModelShape("Mistral-7B");
  auto hw = ParseHardware("8x64GB");
  ASSERT_TRUE(m.ok() && hw.ok());
  Workload w;
  w.task = Task::kReward;
  w.seq_len = 512;
  Strategy s;
  s.zero_stage = 2;
  s.gradient_accumulation = 2;
  const auto item = DeviceItem;
  const MemoryEstimate fp32 = EstimateMemory(*m, w, s, *hw, 8);
  w.eight_bit_moments = true;
  const MemoryEstimate q = EstimateMemory(*m, w, s, *hw, 8);
  const double shard = item(fp32, "optimizer state") / 16;  // padded shard elements (256-aligned differs
                                                            // by at most 256 x tensors / 8)
  EXPECT_NEAR(item(q, "optimizer state"), 8 * shard, 1e-4 * 8 * shard);
  EXPECT_NEAR(item(q, "8-bit moments"), (2 + 8.0 / 256) * shard + 2048, 1e-4 * 2 * shard);
  // About 6 B a parameter less over 8 GPUs: ~5.3 GB per GPU for 7.1e9 parameters.
  const double saved = fp32.device_bytes - q.device_bytes;
  const double p = static_cast<double>(m->RewardModelParameters());
  EXPECT_NEAR(saved, (8 - 2 - 8.0 / 256) * p / 8, 0.01 * 6 * p / 8);
  // One micro-batch a step: no accumulator, the master alone.
  s.gradient_accumulation = 1;
  EXPECT_NEAR(item(EstimateMemory(*m, w, s, *hw, 8), "optimizer state"), 4 * shard, 1e-4 * 4 * shard);
  // A tensor under min_8bit_size keeps fp32 moments: with a limit above the norms' 4096 they count 8 B each.
  s.gradient_accumulation = 2;
  w.min_8bit_size = 4097;
  const double norms = static_cast<double>(2 * m->num_layers + 1 + 1) * m->hidden_size;  // + final, head
  EXPECT_NEAR(item(EstimateMemory(*m, w, s, *hw, 8), "8-bit moments") - item(q, "8-bit moments"),
              8 * norms / 8, 1.0);
}

// The bytes of the host item `name` of an estimate (0 when it has none).
double HostItem(const MemoryEstimate& e, const std::string& name) {
  for (const MemoryItem& i : e.host)
    if (i.name == name) return i.bytes;
  return 0.0;
}

// 8-bit moments with offload, by hand on the small model: 8 GPUs, ZeRO-2, bf16, min_8bit_size 64. Its 21
// trainable tensors (embedding 80; per layer q 64, k 32, v 32, o 64, gate, up and down 128 each, two norms 8;
// the final norm 8; lm_head 80: 1352 elements) each start on a 256-element boundary: 20 x 256 + the
// embedding's 80 (last in backward order) = 5200 elements, padded to 8 ranks x 256 = 6144, a shard of 768
// (3 blocks). Under 64 elements: k, v and the norms, 2 x (32 + 32 + 8 + 8) + 8 = 168, 21 per rank.
TEST(MemoryModelTest, EightBitMomentsOffloadedByHand) {
  const ModelShape m = Small();
  auto hw = ParseHardware("8x64GB");
  ASSERT_TRUE(hw.ok());
  Workload w;
  w.task = Task::kSft;
  w.seq_len = 6;
  w.element_bytes = 2;
  w.eight_bit_moments = true;
  w.min_8bit_size = 64;
  Strategy s;
  s.zero_stage = 2;
  s.gradient_accumulation = 2;
  s.offload = true;
  const double shard = 768, small_per_rank = 168.0 / 8;
  const MemoryEstimate e = EstimateMemory(m, w, s, *hw, 8);
  EXPECT_EQ(DeviceItem(e, "parameters"), 2 * 6144.0);
  // Nothing of the optimizer on the device.
  EXPECT_EQ(DeviceItem(e, "optimizer state"), 0.0);
  EXPECT_EQ(DeviceItem(e, "8-bit moments"), 0.0);
  // Pinned, per GPU: fp32 master 4 B + fp32 gradient accumulator 4 B + bf16 staging 2 B + the parameter
  // copy 2 B a shard element: 8 x 12 x 768 = 73,728.
  EXPECT_EQ(HostItem(e, "optimizer state (pinned)"), 8 * (4 + 4 + 2 + 2) * shard);
  EXPECT_EQ(HostItem(e, "optimizer state (pinned)"), 73728.0);
  // Ordinary memory, per GPU: m and v codes 1 B each a shard element, an fp32 scale each per 256, the small
  // tensors' fp32 m and v (8 B an element of this rank's share) and the two 256-code fp32 maps:
  // 8 x (1536 + 24 + 168 + 2048) = 30,208.
  const double moments = 2 * shard + 2 * 4 * (shard / 256) + 8 * small_per_rank + 2 * 256 * 4;
  EXPECT_EQ(HostItem(e, "8-bit moments (host)"), 8 * moments);
  EXPECT_EQ(HostItem(e, "8-bit moments (host)"), 30208.0);
  EXPECT_EQ(e.host_bytes, 73728.0 + 30208.0);
  // The same moments the device holds without offload, per GPU.
  s.offload = false;
  EXPECT_EQ(DeviceItem(EstimateMemory(m, w, s, *hw, 8), "8-bit moments"), moments);
  // The delayed update's second gradient buffer, as with fp32 moments: fp32 shard + staging, 6 B an element.
  s.offload = true;
  w.delayed_update = true;
  const MemoryEstimate delayed = EstimateMemory(m, w, s, *hw, 8);
  EXPECT_EQ(HostItem(delayed, "second gradient buffer (pinned)"), 8 * 6 * shard);
  EXPECT_EQ(delayed.host_bytes, e.host_bytes + 8 * 6 * shard);
}

// Offloaded 8-bit moments against offloaded fp32 ones on Mistral-7B (no tensor under 4096 elements): the
// host keeps (8 - 2 - 8/256) B less a shard element per GPU (less the 2 KiB of maps), the device the same.
TEST(MemoryModelTest, EightBitMomentsSaveHostMemoryWithOffload) {
  auto m = LoadModelShape("Mistral-7B");
  auto hw = ParseHardware("8x64GB");
  ASSERT_TRUE(m.ok() && hw.ok());
  Workload w;
  w.task = Task::kReward;
  w.seq_len = 512;
  Strategy s;
  s.zero_stage = 2;
  s.gradient_accumulation = 2;
  s.offload = true;
  const MemoryEstimate fp32 = EstimateMemory(*m, w, s, *hw, 8);
  w.eight_bit_moments = true;
  const MemoryEstimate q = EstimateMemory(*m, w, s, *hw, 8);
  // The fp32 shard (64-byte aligned; the 256-element alignment differs by at most 256 x tensors / 8).
  const double shard = HostItem(fp32, "optimizer state (pinned)") / (8 * 20);
  const double drop = fp32.host_bytes - q.host_bytes;
  EXPECT_NEAR(drop, 8 * ((8 - 2 - 8.0 / 256) * shard - 2048), 1e-4 * drop);
  // About 6 B a parameter over the node: ~42 GB for 7.1e9 parameters.
  const double p = static_cast<double>(m->RewardModelParameters());
  EXPECT_NEAR(drop, (8 - 2 - 8.0 / 256) * p, 1e-3 * 6 * p);
  EXPECT_NEAR(q.device_bytes, fp32.device_bytes, 1e-4 * fp32.device_bytes);
}

TEST(MemoryModelTest, ReferenceStrategiesAndLora) {
  const ModelShape m = Small();
  auto hw = ParseHardware("cpu");
  ASSERT_TRUE(hw.ok());
  Workload w;
  w.task = Task::kDpo;
  w.seq_len = 6;
  w.element_bytes = 2;
  w.dataset_pairs = 1000;
  Strategy s;
  s.reference = Reference::kResident;
  auto total_named = [](const std::vector<MemoryItem>& items, const std::string& name) {
    double t = 0;
    for (const MemoryItem& i : items)
      if (i.name.find(name) != std::string::npos) t += i.bytes;
    return t;
  };
  MemoryEstimate e = EstimateMemory(m, w, s, *hw, 1);
  EXPECT_DOUBLE_EQ(total_named(e.device, "reference model"), 2.0 * 1352);
  s.reference = Reference::kOffloaded;
  e = EstimateMemory(m, w, s, *hw, 1);
  EXPECT_DOUBLE_EQ(total_named(e.device, "reference model"), 0.0);
  EXPECT_DOUBLE_EQ(total_named(e.host, "reference model"), 2.0 * 1352);
  s.reference = Reference::kPrecomputed;
  e = EstimateMemory(m, w, s, *hw, 1);
  EXPECT_DOUBLE_EQ(total_named(e.host, "reference log-probs"), 8.0 * 1000);
  // LoRA: the base is frozen (no optimizer state for it), only the adapters train.
  s.lora_rank = 2;
  e = EstimateMemory(m, w, s, *hw, 1);
  EXPECT_EQ(e.trainable_parameters, m.LoraParameters(2));
  EXPECT_DOUBLE_EQ(total_named(e.device, "frozen base weights"), 2.0 * 1352);
  // lora-base: the reference is that frozen base with the adapters off; no copy anywhere, the same
  // reference forward as a resident copy's.
  s.reference = Reference::kResident;
  const MemoryEstimate resident = EstimateMemory(m, w, s, *hw, 1);
  s.reference = Reference::kLoraBase;
  e = EstimateMemory(m, w, s, *hw, 1);
  EXPECT_DOUBLE_EQ(total_named(e.device, "reference"), 0.0);
  EXPECT_DOUBLE_EQ(total_named(e.host, "reference"), 0.0);
  EXPECT_DOUBLE_EQ(resident.device_bytes - e.device_bytes, 2.0 * 1352);
  EXPECT_EQ(e.peak_phase, resident.peak_phase);
  EXPECT_EQ(*ParseReference("lora-base"), Reference::kLoraBase);
  EXPECT_EQ(ParseReference("base").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(MemoryModelTest, GrpoKvCacheByHand) {
  const ModelShape m = Small();
  auto hw = ParseHardware("cpu");
  ASSERT_TRUE(hw.ok());
  Workload w;
  w.task = Task::kGrpo;
  w.prompt_len = 100;
  w.new_tokens = 300;
  w.samples_per_prompt = 64;
  w.element_bytes = 2;
  Strategy s;
  s.reference = Reference::kResident;
  s.rollout_prompts = 16;
  const MemoryEstimate e = EstimateMemory(m, w, s, *hw, 1);
  ASSERT_EQ(e.peak_phase.rfind("rollout generation", 0), 0u) << e.peak_phase;
  double kv = 0;
  for (const MemoryItem& i : e.device)
    if (i.name == "KV cache") kv = i.bytes;
  // k and v, 2 layers, 1 kv head x 4, bf16, 16 prompts x 64 samples, 400 tokens; the int64 key positions.
  EXPECT_DOUBLE_EQ(kv, 2.0 * 2 * 4 * 2 * 1024 * 400 + 8.0 * 1024 * 400);
  // The peak is the larger of the two passes EstimateGrpoPasses reports.
  GrpoPasses passes = EstimateGrpoPasses(m, w, s, *hw, 1);
  EXPECT_DOUBLE_EQ(e.device_bytes, std::max(passes.generation, passes.training));
  EXPECT_GT(passes.generation, passes.training);
  // One sequence per generation pass: the training phase (400 tokens) sets the peak instead.
  s.rollout_prompts = 1;
  w.samples_per_prompt = 1;
  const MemoryEstimate one = EstimateMemory(m, w, s, *hw, 1);
  EXPECT_EQ(one.peak_phase.rfind("rollout generation", 0), std::string::npos) << one.peak_phase;
  // With a vocabulary that makes the log-prob head the peak, it reads the 300 completion positions of the
  // micro-batch's row, not all 399.
  ModelShape wide = m;
  wide.vocab_size = 32000;
  std::string head;
  for (const MemoryItem& i : EstimateMemory(wide, w, s, *hw, 1).device)
    if (i.name == "log-prob head (chunked fp32 logits)") head = i.detail;
  EXPECT_NE(head.find("chunks of 300 of 300 predicted positions"), std::string::npos) << head;
  passes = EstimateGrpoPasses(m, w, s, *hw, 1);
  EXPECT_DOUBLE_EQ(one.device_bytes, std::max(passes.generation, passes.training));
  EXPECT_LT(passes.generation, passes.training);
  // On a GPU too (runtime, NCCL and fragmentation counted the same way in both).
  auto gpu = ParseHardware("8x64GB");
  ASSERT_TRUE(gpu.ok());
  for (int64_t samples : {1, 64}) {
    w.samples_per_prompt = samples;
    passes = EstimateGrpoPasses(m, w, s, *gpu, 2);
    EXPECT_DOUBLE_EQ(EstimateMemory(m, w, s, *gpu, 2).device_bytes,
                     std::max(passes.generation, passes.training));
  }
}

// cuBLAS's workspaces are tensors on a GPU (LibTorch 2.x's caching allocator serves them): two threads'
// worth, the forward's and autograd's, in every pass's tensors, 32 MiB each on Hopper and 8,519,680 B on
// the GPUs before it (CUBLAS_WORKSPACE_CONFIG's defaults); the CPU harness's LibTorch 1.x has none.
TEST(MemoryModelTest, CublasWorkspacesAreTwoThreadsWorthOnAGpu) {
  const ModelShape m = Small();
  Workload w;
  w.task = Task::kGrpo;
  w.prompt_len = 16;
  w.new_tokens = 8;
  w.samples_per_prompt = 4;
  w.element_bytes = 2;
  Strategy s;
  s.rollout_prompts = 2;
  const struct {
    const char* hardware;
    double per_thread;
  } kCases[] = {{"h200", 32.0 * (1 << 20)}, {"8xh100-80", 32.0 * (1 << 20)}, {"a100-40", 8519680.0},
                {"rtx4090", 8519680.0},     {"8x64GB", 32.0 * (1 << 20)},    {"cpu", 0.0}};
  for (const auto& c : kCases) {
    absl::StatusOr<Hardware> hw = ParseHardware(c.hardware);
    ASSERT_TRUE(hw.ok()) << hw.status();
    double listed = 0;
    for (const MemoryItem& i : EstimateMemory(m, w, s, *hw, 1).device)
      if (i.name == "cuBLAS workspaces") listed = i.bytes;
    EXPECT_EQ(listed, 2 * c.per_thread) << c.hardware;
    // Both GRPO passes count them among their tensors (what the allocator reports).
    Hardware none = *hw;
    none.blas_workspace_bytes = 0;
    const GrpoPasses with = EstimateGrpoPasses(m, w, s, *hw, 1),
                     without = EstimateGrpoPasses(m, w, s, none, 1);
    EXPECT_DOUBLE_EQ(with.generation_tensors - without.generation_tensors, 2 * c.per_thread) << c.hardware;
    EXPECT_DOUBLE_EQ(with.training_tensors - without.training_tensors, 2 * c.per_thread) << c.hardware;
  }
}

// The generation pass's terms by hand (fp32, the harness's counts): the cache with its int64 positions and
// the largest transient.
TEST(MemoryModelTest, GrpoGenerationByHand) {
  const ModelShape m = Small();
  // Long prompts: the prefill's attention scores (8 B per head and key) dominate.
  GenerationEstimate g = EstimateGeneration(m, 2, 64, 4, 4);
  EXPECT_DOUBLE_EQ(g.kv_cache, 2.0 * m.num_layers * m.kv_size() * 4 * 2 * 68 + 8.0 * 2 * 68);
  const double n = 2 * 64, base = n * (24 + 2.0 * m.head_dim * 4) + 2 * 64 * 64 + 8.0 * 64 * m.head_dim;
  const double rep = m.num_heads > m.num_kv_heads ? 1 : 0;
  EXPECT_DOUBLE_EQ(g.transient, base + n * (8.0 * m.hidden_size + (2 + 2 * rep) * 4 * m.q_size() +
                                            8.0 * m.kv_size() + 8.0 * m.num_heads * 64));
  EXPECT_EQ(g.phase, "prefill attention");
  // One-token prompts and many sequences: sampling's vocabulary-sized tensors.
  g = EstimateGeneration(m, 64, 1, 4, 4);
  EXPECT_DOUBLE_EQ(g.transient, 64 * (50.0 * m.vocab_size + 160));
  EXPECT_EQ(g.phase, "sampling");
}

// The generation pass's time: an eager decode step waits for the host to dispatch its layers, so on a GPU
// it costs the same whatever the batch; a replayed CUDA graph waits for its kernels' launches, less but
// also whatever the batch. Both terms are the H200's measurements (zerofit_generation_bench, Qwen2.5-0.5B
// shape, bf16, 128 prompt + 128 new tokens). Eager (Hardware::eager_decode_layer_s): 1,710 ms at batch 8,
// 13.36 ms a step, fitted on it; batch 32 ran 1,813 ms, within 6%. Graphed (graphed_decode_layer_s, a later
// run): 439.2 ms at batch 8, fitted on it; batch 32 ran 499.7 ms, 12% over the model. At these shapes the
// memory traffic (the weights once, the KV cache) is 16x under the graphed step and 60x under eager.
TEST(StepTimeTest, GrpoGenerationIsLaunchBoundEagerOrGraphed) {
  auto m = LoadModelShape("Qwen2.5-0.5B");
  ASSERT_TRUE(m.ok()) << m.status();
  auto hw = ParseHardware("1xh200-141");
  ASSERT_TRUE(hw.ok()) << hw.status();
  Workload w;
  w.task = Task::kGrpo;
  w.prompt_len = 128;
  w.new_tokens = 128;
  w.samples_per_prompt = 1;
  w.seq_len = 256;
  Strategy s;
  for (const int64_t batch : {8, 32}) {
    w.global_batch = batch;
    s.rollout_prompts = batch;  // one pass
    const double eager = EstimateStepTime(*m, w, s, *hw, 1).generation;
    EXPECT_NEAR(eager, 128 * 24 * 0.557e-3, 1e-9) << "batch " << batch;
    const double measured = batch == 8 ? 1.710 : 1.813;
    EXPECT_LT(std::abs(eager / measured - 1), 0.06) << "batch " << batch;
    w.graphed_decode = true;
    const double graphed = EstimateStepTime(*m, w, s, *hw, 1).generation;
    w.graphed_decode = false;
    EXPECT_NEAR(graphed, 128 * 24 * 0.143e-3, 1e-9) << "batch " << batch;
    const double graphed_measured = batch == 8 ? 0.4392 : 0.4997;
    EXPECT_LT(std::abs(graphed / graphed_measured - 1), batch == 8 ? 0.01 : 0.13) << "batch " << batch;
    const double kv = 2.0 * 24 * m->kv_size() * 2 * batch * (128 + 128);
    EXPECT_LT(128 * (2.0 * m->PolicyParameters() + kv) / 4.8e12, graphed / 10) << "launch-bound, not traffic";
    // Memory-bound where the traffic is larger: a long KV cache at a large batch. The fixed-shape step reads
    // every slot of the pass, written or not (an eager step only those written: half the new tokens).
    Workload big = w;
    big.prompt_len = 32768;
    big.global_batch = 64;
    Strategy all = s;
    all.rollout_prompts = 64;
    big.graphed_decode = true;
    const double kv_big = 2.0 * 24 * m->kv_size() * 2 * 64 * (32768 + 128);
    EXPECT_NEAR(EstimateStepTime(*m, big, all, *hw, 1).generation,
                128 * (2.0 * m->PolicyParameters() + kv_big) / 4.8e12, 1e-9);
  }
}

TEST(HardwareTest, ProfilesAndCustomSpecs) {
  auto h = ParseHardware("8x64GB");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->gpus_per_node, 8);
  EXPECT_DOUBLE_EQ(h->gpu_bytes, 64e9);
  h = ParseHardware("h100-80");
  ASSERT_TRUE(h.ok());
  EXPECT_DOUBLE_EQ(h->gpu_bytes, 80e9);
  EXPECT_EQ(h->gpus_per_node, 8);
  h = ParseHardware("4xA100-40", 512);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->gpus_per_node, 4);
  EXPECT_DOUBLE_EQ(h->gpu_bytes, 40e9);
  EXPECT_DOUBLE_EQ(h->host_bytes_per_node, 512e9);
  // GPU workers are LibTorch 2.x builds with SDPA; the CPU profile is Debian's LibTorch 1.13.
  EXPECT_EQ(h->kernels, WorkerKernels::kLibTorch2Sdpa);
  EXPECT_EQ(ParseHardware("cpu")->kernels, WorkerKernels::kLibTorch1Eager);
  for (const char* ok : {"h200-141", "v100-32", "rtx4090-24", "1xrtx4090-24", "cpu", "2x24GB"}) {
    EXPECT_TRUE(ParseHardware(ok).ok()) << ok;
  }
  for (const char* bad : {"8x", "x64GB", "0x64GB", "8xb200", "64", "8x0GB"}) {
    auto r = ParseHardware(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--hardware"), std::string::npos) << r.status();
  }
}

}  // namespace
}  // namespace zerofit::planner
