#include "planner/memory_model.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/excerpt.h"

namespace zerofit::planner {
namespace {

// Per-token bytes a decoder layer keeps for backward, as coefficients of hidden (H), intermediate (I), the
// query width (heads x head_dim), the attention row (heads x seq_len) and a constant (two fp32 RMS values).
// Counted with worker/torch/memory_probe on the project's LlamaModel; docs/planning.md explains each.
constexpr double kRngStateBytes = 5056;

// fp32 logits per chunk of the worker's ChunkedTokenLogProbs (kChunkLogitsBytes in
// worker/torch/model/chunked_log_probs.h; the planner links no LibTorch code, so the figure is repeated).
constexpr double kLogProbChunkBytes = 256.0 * (1 << 20);

// Rows of one log-prob chunk when `predicted` rows (tokens that predict a next token) share a forward.
double LogProbChunkRows(double vocab, double predicted) {
  return std::min(predicted, std::max(1.0, std::floor(kLogProbChunkBytes / (4.0 * vocab))));
}

// Per token and decoder layer: coefficients of hidden (H), intermediate (I), the query width (heads x
// head_dim), the K/V width (kv heads x head_dim), the heads, the attention row (heads x seq_len), a constant
// (two fp32 RMS values) and the LoRA rank.
struct LayerCoefficients {
  double hidden, inter, query, kv, heads, attn_row, constant, lora_per_rank;
};

// Debian's LibTorch 1.13 with eager attention, as the harness counted it (docs/planning.md). Without
// activation checkpointing each RMSNorm and SwiGLU's silu(gate) * up are lean (llama_model.cc): a norm is
// recomputed in backward and keeps its input (the residual stream, in the parameter dtype) and nothing of its
// fp32 arithmetic, the MLP keeps gate and up, neither silu(gate) nor their product (swiglu.h;
// tests/worker/torch/recomputed_call_test.cc counts them).
LayerCoefficients LeanLibTorch1(int a, bool lora) {
  if (!lora) {
    // Each norm's input and output (4 hidden-wide), q, k and v (repeated heads or bmm copies) and the
    // attention output (4 query-wide), gate and up (2 intermediate: the product down reads is recomputed,
    // SwiGluThenDown), the softmax's probabilities (fp32; in bf16 also their bf16 copy: 6 bytes).
    if (a == 4) return {16, 8, 16, 0, 0, 4, 0, 0};
    return {8, 4, 8, 0, 0, 6, 0, 0};
  }
  // LoRA (frozen base): inputs of frozen linears are not kept (autograd saves a matmul input only for the
  // weight's gradient): the MLP's product and the second norm's output go; each adapter keeps its rank-r
  // middle.
  if (a == 4) return {12, 8, 16, 0, 0, 4, 0, 16};
  return {6, 4, 8, 0, 0, 6, 0, 8};
}

// The plain pieces, inside a checkpointed layer: its graph lives for one layer's backward only.
LayerCoefficients PlainLibTorch1(int a, bool lora) {
  if (!lora) {
    // fp32: the residual stream twice, 3 tensors per RMSNorm, q (bmm copy), k and v (repeated heads or
    // bmm copies) and the attention output (4 query-wide), gate/silu/up/product (4 intermediate), fp32 probs.
    if (a == 4) return {32, 16, 16, 0, 0, 4, 8, 0};
    // bf16: each RMSNorm keeps its fp32 upcast, the fp32 square mean() reads, the bf16 normalised value and
    // its output (12 bytes per element; scripts/layer_saved_bytes.py lists them), the softmax keeps fp32
    // probabilities and their bf16 copy (6 bytes).
    return {24, 8, 8, 0, 0, 6, 8, 0};
  }
  if (a == 4) return {20, 12, 16, 0, 0, 4, 8, 16};
  return {18, 6, 8, 0, 0, 6, 8, 8};
}

// Whether the plan counts the fused pieces' terms: everywhere they run but in checkpointed layers with LoRA,
// whose terms stay the plain ones (not fitted).
bool FusedPiecesCount(bool fused, bool checkpointed, bool lora) { return fused && (!checkpointed || !lora); }

// The fused pieces (fused_kernels.h) keep what the lean ones keep and each norm one fp32 reciprocal RMS a
// token; a checkpointed layer (which does not release the MLP's product: SwiGluThenDown runs outside
// checkpointing only) also the product. With LoRA a checkpointed layer's terms are the plain ones (not
// fitted for the fused pieces: an over-estimate).
LayerCoefficients Coefficients(int a, bool lora, bool lean, WorkerKernels kernels, bool fused) {
  fused = FusedPiecesCount(fused, !lean, lora);
  LayerCoefficients c = lean || fused ? LeanLibTorch1(a, lora) : PlainLibTorch1(a, lora);
  if (fused) c.constant = 8;
  if (fused && !lean) c.inter += a;
  if (kernels == WorkerKernels::kLibTorch1Eager) return c;
  // LibTorch 2.x's mean() keeps only its input's sizes: each of the two plain RMSNorms keeps one fp32 H-sized
  // tensor less (x.pow(2), which 1.x kept for mean's backward). A lean or fused norm keeps neither.
  if (!lean && !fused) c.hidden -= 8;
  // Scaled-dot-product attention keeps q, k and v as given (grouped-query K/V not repeated: enable_gqa), its
  // output, which is also o_proj's input (cuDNN allocates it in q's [B, T, heads, head_dim] layout, so the
  // transpose back is a view), and an fp32 logsumexp per head; no [heads, T] row. Eager kept q, the repeated
  // K and V and o_proj's input: 4 query-wide tensors.
  c.query = 2.0 * a;
  c.kv = 2.0 * a;
  c.heads = 4;
  c.attn_row = 0;
  return c;
}

int64_t TrainedModelParameters(const ModelShape& m, Task t) {
  return t == Task::kReward ? m.RewardModelParameters() : m.PolicyParameters();
}

int64_t TrainableParameters(const ModelShape& m, Task t, int64_t lora_rank) {
  if (lora_rank <= 0) return TrainedModelParameters(m, t);
  return m.LoraParameters(lora_rank) + (t == Task::kReward ? m.hidden_size : 0);
}

// Bytes of a no-grad forward over n tokens (reference or reward model, GRPO scoring): the largest of a
// decoder layer's live tensors (residual, MLP gate/up/product) and a policy head's: the hidden states and
// one chunk of rows' fp32 logits with logsumexp's fp32 temporary (8 B per entry; a bf16 chunk's own logits
// are freed by the upcast before logsumexp runs).
// `head_tokens`: the positions the head scores (all of them, or GRPO's completion positions).
double InferenceForwardBytes(const ModelShape& m, double tokens, double head_tokens, int a,
                             bool policy_head) {
  const double layer = tokens * (2.0 * a * m.hidden_size + 3.0 * a * m.intermediate_size);
  const double v = static_cast<double>(m.vocab_size);
  const double head =
      policy_head ? head_tokens * a * m.hidden_size + 8.0 * LogProbChunkRows(v, head_tokens) * v : 0;
  return std::max(layer, head);
}

}  // namespace

const char* TaskName(Task t) {
  switch (t) {
    case Task::kSft:
      return "sft";
    case Task::kReward:
      return "reward";
    case Task::kDpo:
      return "dpo";
    case Task::kGrpo:
      return "grpo";
  }
  return "?";
}

absl::StatusOr<Task> ParseTask(const std::string& name) {
  if (name == "sft") return Task::kSft;
  if (name == "reward") return Task::kReward;
  if (name == "dpo") return Task::kDpo;
  if (name == "grpo") return Task::kGrpo;
  return absl::InvalidArgumentError(
      absl::StrCat("--task: unknown task '", name, "' (sft, reward, dpo, grpo)"));
}

const char* ReferenceName(Reference r) {
  switch (r) {
    case Reference::kNone:
      return "none";
    case Reference::kResident:
      return "resident";
    case Reference::kOffloaded:
      return "offloaded";
    case Reference::kPrecomputed:
      return "precomputed";
    case Reference::kLoraBase:
      return "lora-base";
  }
  return "?";
}

bool ReferenceRunsForward(Reference r) {
  return r == Reference::kResident || r == Reference::kOffloaded || r == Reference::kLoraBase;
}

absl::StatusOr<Reference> ParseReference(const std::string& name) {
  for (Reference r : {Reference::kNone, Reference::kResident, Reference::kOffloaded, Reference::kPrecomputed,
                      Reference::kLoraBase}) {
    if (name == ReferenceName(r)) return r;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown reference '", core::Excerpt(name),
                                                 "' (none, resident, offloaded, precomputed, lora-base)"));
}

double LayerSavedBytesPerToken(const ModelShape& m, int64_t seq_len, int a, int64_t lora_rank,
                               WorkerKernels kernels, bool checkpointed, bool fused) {
  const LayerCoefficients c = Coefficients(a, lora_rank > 0, !checkpointed, kernels, fused);
  return c.hidden * m.hidden_size + c.inter * m.intermediate_size + c.query * m.q_size() +
         c.kv * m.kv_size() + c.heads * m.num_heads +
         c.attn_row * static_cast<double>(m.num_heads * seq_len) + c.constant +
         c.lora_per_rank * static_cast<double>(std::max<int64_t>(lora_rank, 0));
}

namespace {

// The transient bytes per token of a decoder layer's backward: the MLP's gradients (gate/up/product) or an
// RMSNorm's backward, whichever is larger. A lean norm recomputes its fp32 arithmetic and backpropagates
// through it beside the incoming gradients: 24 bytes per hidden element in fp32, 26 in bf16 over what the
// layer keeps, 10 more with LoRA (a frozen norm's input gradient flows on beside the adapters'), as the
// tracking allocator counts them (planner_validation_test's decoder-layer-backward rows). A plain norm's
// saved fp32 tensors are freed as its backward runs: 8 (fp32) or 12 (bf16), 14 with LoRA.
double LayerBackwardBytesPerToken(const ModelShape& m, int a, bool lora, bool lean, bool fused) {
  const double h = static_cast<double>(m.hidden_size);
  const double inter = static_cast<double>(m.intermediate_size);
  // Fused: no norm arithmetic in fp32 around the MLP's backward; its product recomputed, down's input
  // gradient, gate's and up's, and two hidden-wide gradients, in the parameter dtype (fitted on
  // planner_validation_test's fused rows). Recomputed (checkpointed), over the layer's tensors with the
  // product: a (2 I - 2 H) (BENCHMARKS.md, "A checkpointed layer's recomputed fused pieces").
  if (fused && !lora) return lean ? a * (3 * inter + 2 * h) : a * std::max(0.0, 2 * inter - 2 * h);
  const double norm = (lean ? (a == 4 ? 24.0 : 26.0) : (a == 4 ? 8.0 : 12.0)) * h;
  if (lora) return std::max(a * std::max(0.0, 3 * inter - 2 * h), lean ? norm + 10.0 * h : 14.0 * h);
  // Lean MLP: the product recomputed before down's backward, then down's input gradient, gate's and up's
  // (3 intermediate-wide), with the hidden-wide gradients around them (bf16 keeps fp32 ones).
  if (lean) return std::max(a == 4 ? 4.0 * (3 * inter + 2 * h) : 6.0 * inter + 13.0 * h, norm);
  return std::max((a == 4 ? 4.0 : 2.0) * std::max(0.0, 2 * inter - 3 * h), norm);
}

// Eager attention's softmax backward, per token: two [heads, T] rows, in fp32 the probabilities' gradient and
// its result (8 B per head and key), in bf16 the bf16 gradient and the fp32 result (6 B).
double EagerSoftmaxBackwardRowsPerToken(const ModelShape& m, int a, int64_t seq_len) {
  return (a == 4 ? 8.0 : 6.0) * static_cast<double>(m.num_heads * seq_len);
}

// A lean layer's attention backward, per token, relative to all the saved activations: by then the MLP's
// gate, up and the second norm's input and output (2 intermediate- and 2 hidden-wide) are freed. Eager
// attention's softmax backward holds [heads, T] rows: in fp32 the probabilities' gradient and its result (8
// B), in bf16 the bf16 gradient and the fp32 result (6 B), with six hidden-wide gradients; SDPA's backward
// holds q, k and v gradients (no [heads, T] row). Fitted with the tracking allocator on
// planner_validation_test's GRPO rows (fp32: five rows within 1%; bf16: one row).
double LeanAttentionPhasePerToken(const ModelShape& m, int a, int64_t seq_len, WorkerKernels kernels) {
  const double h = static_cast<double>(m.hidden_size);
  const double inter = static_cast<double>(m.intermediate_size);
  const double rows = kernels == WorkerKernels::kLibTorch1Eager
                          ? EagerSoftmaxBackwardRowsPerToken(m, a, seq_len)
                          : a * static_cast<double>(m.q_size() + 2 * m.kv_size());
  return rows + 6.0 * a * h - a * (2 * inter + 2 * h);
}

// A recomputed plain layer's attention backward, per token, relative to all it keeps: by then its MLP's
// intermediate-wide tensors and its second norm's and residual's hidden-wide ones (fp32 16, bf16 14 B per
// element) are freed, and eager attention's softmax backward holds two [heads, T] rows (fp32 8 B, bf16 6 B
// per head and key). It sets the peak from about 192 tokens (fp32) or 128 (bf16) on the harness's models; the
// MLP's backward before. Fitted with the tracking allocator on zerofit_memory_probe --checkpointing runs of
// planner_validation_test's models A and B at 64 to 512 tokens (BENCHMARKS.md: within +1.6% to +5.2% of the
// recomputed layer's bytes where it is the peak). SDPA keeps no [heads, T] rows: not counted there.
// With the fused pieces what is freed by then is the MLP's gate, up and product and the second norm's input
// and output: a (3 I + 2 H).
double RecomputedAttentionPhasePerToken(const ModelShape& m, int a, int64_t seq_len, WorkerKernels kernels,
                                        bool fused) {
  if (kernels != WorkerKernels::kLibTorch1Eager) return 0.0;
  const double h = static_cast<double>(m.hidden_size);
  const double inter = static_cast<double>(m.intermediate_size);
  const double rows = EagerSoftmaxBackwardRowsPerToken(m, a, seq_len);
  const double freed =
      fused ? a * (3 * inter + 2 * h) : (a == 4 ? 16.0 : 8.0) * inter + (a == 4 ? 16.0 : 14.0) * h;
  return rows - freed;
}

}  // namespace

ActivationEstimate EstimateActivations(const ModelShape& m, const ActivationJob& job) {
  const int a = job.element_bytes;
  const bool lora = job.lora_rank > 0, policy_head = job.policy_head, checkpointing = job.checkpointing;
  const bool lean = !checkpointing && !job.plain_pieces;
  const bool fused = !job.plain_pieces && FusedPiecesCount(job.fused_pieces, checkpointing, lora);
  const double t = static_cast<double>(job.seq_len);
  const double n = static_cast<double>(job.rows) * t;  // tokens
  const double h = static_cast<double>(m.hidden_size);
  const double v = static_cast<double>(m.vocab_size);
  const double layers = static_cast<double>(m.num_layers);
  // Rotary cos/sin tables (param dtype) and the bool causal mask, once per forward.
  const double fixed = 2.0 * t * m.head_dim * a + t * t;
  // The head: the final RMSNorm (and the residual it reads) unless frozen. A policy's chunked log-probs
  // (ChunkedTokenLogProbs) keep, per position that predicts a token (T - 1 of T), the fp32 logsumexp and the
  // int64 target; with a frozen head also the hidden state they recompute the logits from (a trained head's
  // linear kept that one before, counted in head_saved).
  const double predicted = (job.head_positions < 0 ? t - 1.0 : static_cast<double>(job.head_positions)) / t;
  // The final norm: lean like each layer's (its input and, trained, its output), or under checkpointing
  // plain, where LibTorch 1.x keeps one more fp32 copy, as in each layer's (Coefficients).
  const bool libtorch1 = job.kernels == WorkerKernels::kLibTorch1Eager;
  // Fused: the lean norm's and its fp32 reciprocal RMS.
  double head_saved = lean || fused ? (lora ? 1.0 : 2.0) * a * h + (fused ? 4.0 : 0.0)
                      : lora        ? (policy_head ? 0.0 : a * h)
                                    : ((a == 4 ? 16.0 : 12.0) - (libtorch1 ? 0 : 4)) * h;
  const double logits_saved = policy_head ? (12.0 + (lora ? a * h : 0.0)) * predicted : 0.0;
  // Backward of the head, in bytes for the whole micro-batch: one chunk's logits (fp32: one buffer, turned
  // into its gradient in place; bf16: also the chunk's bf16 logits and the gradient's bf16 cast), and for
  // a trained head its weight's gradient (fp32 accumulated in place; bf16 with one chunk: that chunk's
  // GEMM; with several: an fp32 accumulator plus one bf16 [V, H] product or the final cast).
  const double chunk = policy_head ? LogProbChunkRows(v, n * predicted) : 0.0;
  const bool one_chunk = chunk >= n * predicted;  // then a bf16 head's one GEMM is its gradient
  const bool accumulated = policy_head && !lora && a != 4 && !one_chunk;
  const double head_weight_grad = policy_head && !lora ? (accumulated ? 4.0 + a : 1.0 * a) * v * h : 0.0;
  // An accumulated bf16 product joins the fp32 accumulator after the chunk's buffers are freed, converted to
  // fp32 in slices of at most kLogProbChunkBytes (a CPU temporary; CUDA converts in the kernel, needs none).
  const double add_temporary = accumulated ? std::min(4.0 * v * h, kLogProbChunkBytes) : 0.0;
  // Plus the hidden states' gradient, [rows x (T-1), H] in the parameter dtype, filled chunk by chunk.
  const double head_transient = std::max(chunk * v * (a == 4 ? 4.0 : a + 4.0), add_temporary) +
                                head_weight_grad + (policy_head ? n * predicted * a * h : 0.0);
  const double layer_moment = LayerBackwardBytesPerToken(m, a, lora, lean, fused);
  const double layer_full =
      LayerSavedBytesPerToken(m, job.seq_len, a, job.lora_rank, job.kernels, !lean, fused);
  ActivationEstimate e;
  if (checkpointing) {
    // Checkpoints keep each layer's input and the RNG state the recompute replays (5056 bytes: LibTorch's
    // CPU generator; the CUDA one adds 16). With a frozen base the final plain RMSNorm keeps two fp32 tensors
    // (one under LibTorch 2.x) that no trainable weight needed otherwise.
    head_saved += lora ? (libtorch1 ? 8.0 : 4.0) * h : 0.0;
    e.saved = n * (layers * a * h + head_saved + logits_saved) + fixed + layers * kRngStateBytes;
  } else {
    e.saved = n * (layers * layer_full + head_saved + logits_saved) + fixed;
  }
  const double head_phase = e.saved + head_transient;
  // Forward of the head, at the end of the forward: one chunk's fp32 logits and logsumexp's fp32 temporary
  // (8 B per entry in either dtype: a bf16 chunk's own logits are freed by the upcast), while the final
  // norm's output and the head's [rows x (T-1), H] copy of it are both alive (one of them counted in
  // `saved`: the copy with a frozen head, else the norm output).
  const double head_forward =
      policy_head ? e.saved + n * (lora ? 1.0 : predicted) * a * h + 8.0 * chunk * v : 0.0;
  double layer_phase;
  if (checkpointing && !lora) {
    // The head is done; one layer is recomputed on top of the checkpoints and backpropagated, with the
    // incoming gradient of the hidden state: its MLP's backward, or later its eager attention's.
    const double recomputed =
        std::max(layer_moment, RecomputedAttentionPhasePerToken(m, a, job.seq_len, job.kernels, fused));
    // With the fused pieces also one weight's gradient (the MLP's, the largest), alive until the ZeRO-2
    // hook has copied it into its bucket (the plain terms' fit absorbed it).
    const double weight_gradient =
        fused ? a * static_cast<double>(m.hidden_size) * static_cast<double>(m.intermediate_size) : 0.0;
    layer_phase = e.saved - n * logits_saved + n * (layer_full + recomputed + a * h) + weight_gradient;
  } else if (checkpointing) {
    // LoRA: each layer already backpropagated leaves an fp32 hidden-sized gradient behind until the end.
    layer_phase = e.saved - n * logits_saved + n * (layer_full + layer_moment + 4.0 * h * (layers - 1));
  } else {
    const double attention = lean && !lora ? LeanAttentionPhasePerToken(m, a, job.seq_len, job.kernels) : 0.0;
    layer_phase = e.saved - n * logits_saved + n * std::max(layer_moment, attention);
  }
  e.peak = std::max({head_forward, head_phase, layer_phase});
  if (head_forward >= std::max(head_phase, layer_phase)) {
    e.logits = n * logits_saved + 8.0 * chunk * v;
    e.phase = "loss-head forward";
  } else if (head_phase >= layer_phase) {
    e.logits = n * logits_saved + head_transient;
    e.phase = "loss-head backward";
  } else {
    e.phase = checkpointing ? "recomputed layer backward" : "decoder layer backward";
  }
  return e;
}

namespace {

// Adds the named items of an estimate, device or host; zero-byte items are left out.
class Items {
 public:
  explicit Items(MemoryEstimate* est) : est_(est) {}
  void Device(std::string name, double bytes, std::string detail) const {
    if (bytes > 0) est_->device.push_back({std::move(name), bytes, std::move(detail)});
  }
  void Host(std::string name, double bytes, std::string detail) const {
    if (bytes > 0) est_->host.push_back({std::move(name), bytes, std::move(detail)});
  }

 private:
  MemoryEstimate* est_;
};

// The flat buffer's size, each bucket's size (elements) and how many buckets.
struct BucketLayout {
  double padded = 0, buckets = 0;
  double small = 0;  // elements of the tensors under min_8bit_size (8-bit moments: their fp32 moments)
  std::vector<double> sizes;  // each bucket's padded elements, largest first
  // Elements of the `k` largest buckets: the engine's up-front staging pool of k buffers.
  double Largest(int64_t k) const {
    double sum = 0;
    for (size_t i = 0; i < sizes.size() && static_cast<int64_t>(i) < k; ++i) sum += sizes[i];
    return sum;
  }
};

// Buckets exactly as sharding::BucketPlan builds them: whole tensors in backward order, a new bucket when
// the next tensor would overflow bucket_bytes, each tensor on a 64-byte boundary, each bucket padded to
// world x 64 bytes and split in equal shards. With 8-bit moments the alignment is 256 elements (both are
// powers of two: their lcm is the larger), as Zero2Optimizer sets it.
BucketLayout LayoutBuckets(const ModelShape& m, const Workload& w, const Strategy& s, int world_size) {
  const int a = w.element_bytes;
  const int64_t align = std::max<int64_t>(std::max(1, 64 / a), w.eight_bit_moments ? 256 : 1);
  const std::vector<int64_t> tensors = m.TrainableTensors(w.task == Task::kReward, s.lora_rank);
  const int64_t bucket_elems = std::max<int64_t>(1, static_cast<int64_t>(s.bucket_bytes) / a);
  auto round_up = [](int64_t x, int64_t k) { return (x + k - 1) / k * k; };
  std::vector<int64_t> bucket_used;
  int64_t used = 0;
  bool open = false;
  for (size_t k = tensors.size(); k-- > 0;) {
    if (open && round_up(used, align) + tensors[k] > bucket_elems) {
      bucket_used.push_back(used);
      used = 0;
      open = false;
    }
    used = round_up(used, align) + tensors[k];
    open = true;
  }
  if (open) bucket_used.push_back(used);
  BucketLayout out;
  for (int64_t t : tensors) {
    if (t < w.min_8bit_size) out.small += static_cast<double>(t);
  }
  for (int64_t u : bucket_used) {
    const double p = static_cast<double>(round_up(std::max<int64_t>(u, 1), world_size * align));
    out.padded += p;
    out.sizes.push_back(p);
  }
  std::sort(out.sizes.begin(), out.sizes.end(), std::greater<double>());
  out.buckets = static_cast<double>(bucket_used.size());
  return out;
}

// On the device with one micro-batch a step (GRPO's varies) the engine keeps no fp32 gradient accumulator:
// AdamW reads the shards where the reduce-scatters landed them, so those stay until the step
// (sharding/device_shard_updater.h).
bool UpdaterReadsTheLanding(const Workload& w, const Strategy& s) {
  return s.zero_stage >= 1 && !s.offload && s.gradient_accumulation == 1 && w.task != Task::kGrpo;
}

// Parameters, frozen base weights and gradients, by ZeRO stage.
void AddWeightsAndGradients(const ModelShape& m, const Workload& w, const Strategy& s, int world_size,
                            const BucketLayout& b, const Items& items) {
  const int a = w.element_bytes;
  const double world = std::max(1, world_size);
  const int64_t trainable = TrainableParameters(m, w.task, s.lora_rank);
  const double shard = s.zero_stage >= 1 ? b.padded / world : b.padded;
  if (s.zero_stage == 3) {
    items.Device("parameters (shard)", a * b.padded / world,
                 absl::StrCat(a, " B x ", trainable, " / ", world_size));
    items.Device("parameters (gathered layers)", 2.0 * a * m.LayerParameters() + a * m.EmbeddingParameters(),
                 "two decoder layers + the embedding gathered at a time");
  } else {
    items.Device("parameters", a * b.padded, absl::StrCat(a, " B x ", trainable, " trainable"));
  }
  if (s.lora_rank > 0) {
    const double frozen = static_cast<double>(TrainedModelParameters(m, w.task)) -
                          (w.task == Task::kReward ? m.hidden_size : 0);
    items.Device("frozen base weights", a * frozen, absl::StrCat(a, " B x ", static_cast<int64_t>(frozen)));
  }
  if (s.zero_stage <= 1) {
    items.Device("gradients", a * b.padded, absl::StrCat(a, " B x ", trainable, " (full, all-reduced)"));
  } else {
    const int64_t pool = std::min<int64_t>(static_cast<int64_t>(b.buckets), s.staging_buffers);
    if (UpdaterReadsTheLanding(w, s)) {
      items.Device("gradient shard (reduce-scatter landing)", a * shard, absl::StrCat(a, " B x shard"));
    } else {
      // The updater consumes each landed shard as it arrives (offload's copy out, the accumulation): the
      // engine lands them in a pool of slots sized as the largest buckets' shards (sharding/landing_pool.h).
      items.Device("reduce-scatter landing slots", a * b.Largest(pool) / world,
                   absl::StrCat(pool, " slots: the ", pool, " largest buckets' shards"));
    }
    // The engine's staging pool: as many buffers as the largest buckets, each sized as one of them
    // (sharding/gradient_reducer.cc).
    items.Device("communication buckets", a * b.Largest(pool),
                 absl::StrCat(pool, " staging: the ", pool, " largest buckets, ",
                              static_cast<int64_t>(b.Largest(pool)), " elements"));
  }
}

// The 8-bit moments of one rank's shard, as sharding::MomentLayout stores them on the device
// (sharding/quantized_moments.h) or in host memory with offload: m and v a byte each per shard element, a
// scale each per 256, the small tensors' fp32 moments (their share of this rank: small / world) and the two
// 256-code fp32 maps. Bytes per GPU.
MemoryItem EightBitMoments(const Workload& w, const Strategy& s, int world_size, double shard,
                           const BucketLayout& b) {
  const double small = s.zero_stage >= 1 ? b.small / std::max(1, world_size) : b.small;
  const double bytes = 2.0 * shard + 8.0 * (shard / 256) + 8.0 * small + 2 * 256 * 4.0;
  return {
      "8-bit moments", bytes,
      absl::StrCat("2 B x ", static_cast<int64_t>(shard), " codes + 8 B x ",
                   static_cast<int64_t>(shard / 256), " block scales + 8 B x ", static_cast<int64_t>(small),
                   " fp32 (tensors under ", w.min_8bit_size, " elements) + maps")};
}

// 8-bit moments on the device: the fp32 master and accumulator as with fp32 moments, and EightBitMoments.
void AddEightBitOptimizerState(const Workload& w, const Strategy& s, int world_size, double shard,
                               const BucketLayout& b, bool no_accumulator, const Items& items) {
  const bool accumulator = !no_accumulator && s.zero_stage >= 1;
  items.Device("optimizer state", (accumulator ? 8.0 : 4.0) * shard,
               absl::StrCat(accumulator ? 8 : 4, " B x ", static_cast<int64_t>(shard),
                            accumulator ? " (fp32 master, fp32 grad shard)" : " (fp32 master)"));
  MemoryItem moments = EightBitMoments(w, s, world_size, shard, b);
  items.Device(std::move(moments.name), moments.bytes, std::move(moments.detail));
}

// Offload (ZeRO-1/2): each GPU's optimizer state in host memory, none of it on the device. Pinned (the
// copies to and from the device read and write it): the fp32 master, the fp32 gradient accumulator, the
// bf16 staging of the gradient shard and the parameter copy that goes back up, and with fp32 moments m
// and v. 8-bit moments (offload/host_quantized_moments.h) never cross the bus: the CPU AdamW updates them
// in place in ordinary memory, the same bytes EightBitMoments counts on the device.
void AddOffloadedOptimizerState(const Workload& w, const Strategy& s, const Hardware& hw, int world_size,
                                double shard, const BucketLayout& b, const Items& items) {
  const int a = w.element_bytes;
  const int gpus = hw.gpus_per_node;
  const auto elements = static_cast<int64_t>(shard);
  if (w.eight_bit_moments) {
    items.Host(
        "optimizer state (pinned)", gpus * (8.0 + 2.0 * a) * shard,
        absl::StrCat(gpus, " GPUs x (8 B x ", elements, " (fp32 master, fp32 grad shard; moments 8-bit, ",
                     "not pinned) + 2 x ", a, " B x ", elements, " (staging, parameter copy))"));
    const MemoryItem moments = EightBitMoments(w, s, world_size, shard, b);
    items.Host("8-bit moments (host)", gpus * moments.bytes,
               absl::StrCat(gpus, " GPUs x (", moments.detail, "), not pinned"));
  } else {
    items.Host(
        "optimizer state (pinned)", gpus * (16.0 + 2.0 * a) * shard,
        absl::StrCat(gpus, " GPUs x (16 B x ", elements, " (master, m, v, fp32 grad shard) + bf16 staging)"));
  }
  if (w.delayed_update) {
    items.Host("second gradient buffer (pinned)", gpus * (4.0 + a) * shard,
               absl::StrCat(gpus, " GPUs x ", 4 + a, " B x ", elements,
                            " (delayed update: fp32 grad shard + staging)"));
  }
}

// Optimizer state (fp32 master + exp_avg + exp_avg_sq, + the fp32 gradient accumulator of the shard), on
// the device or on the host (offload); the reference and extra frozen models.
void AddOptimizerAndFrozenModels(const ModelShape& m, const Workload& w, const Strategy& s,
                                 const Hardware& hw, int world_size, const BucketLayout& b,
                                 const Items& items) {
  const int a = w.element_bytes;
  const double shard = s.zero_stage >= 1 ? b.padded / std::max(1, world_size) : b.padded;
  const int64_t trainable = TrainableParameters(m, w.task, s.lora_rank);
  const bool no_accumulator = UpdaterReadsTheLanding(w, s);
  if (s.offload && s.zero_stage >= 1) {
    AddOffloadedOptimizerState(w, s, hw, world_size, shard, b, items);
  } else if (w.eight_bit_moments) {
    AddEightBitOptimizerState(w, s, world_size, shard, b, no_accumulator, items);
  } else if (no_accumulator) {
    items.Device("optimizer state", 12.0 * shard,
                 absl::StrCat("12 B x ", static_cast<int64_t>(shard),
                              " (master, m, v; one micro-batch a step: no fp32 grad shard)"));
  } else if (s.zero_stage >= 1) {
    items.Device("optimizer state", 16.0 * shard,
                 absl::StrCat("16 B x ", static_cast<int64_t>(shard), " (master, m, v, fp32 grad shard)"));
  } else {
    items.Device("optimizer state", 12.0 * b.padded, absl::StrCat("12 B x ", trainable, " (master, m, v)"));
  }
  const double ref_bytes = a * static_cast<double>(m.PolicyParameters());
  if (w.task == Task::kDpo || w.task == Task::kGrpo) {
    if (s.reference == Reference::kResident) items.Device("reference model", ref_bytes, "resident, frozen");
    if (s.reference == Reference::kOffloaded) {
      items.Host("reference model (pinned)", hw.gpus_per_node * ref_bytes, "one copy per GPU");
    }
    if (s.reference == Reference::kPrecomputed) {
      items.Host("reference log-probs", 8.0 * static_cast<double>(w.dataset_pairs) * hw.gpus_per_node,
                 "2 x fp32 per training pair");
    }
  }
  if (w.extra_frozen_models > 0) {
    items.Device("extra frozen models",
                 w.extra_frozen_models * a * static_cast<double>(m.RewardModelParameters()),
                 absl::StrCat(w.extra_frozen_models, " x reward-model weights"));
  }
}

// cuBLAS's workspaces, which LibTorch 2.x allocates from the caching allocator (so a GPU's allocated bytes
// count them): one per thread that runs GEMMs, the forward's (and generation's) and autograd's backward
// thread. LibTorch 1.x (the CPU harness) has none.
void AddBlasWorkspaces(const Hardware& hw, const Items& items) {
  if (hw.cpu || hw.kernels != WorkerKernels::kLibTorch2Sdpa || hw.blas_workspace_bytes <= 0) return;
  items.Device("cuBLAS workspaces", 2 * hw.blas_workspace_bytes,
               absl::StrFormat("2 threads (forward, autograd) x %.0f B", hw.blas_workspace_bytes));
}

// The step's dynamic peak: which phase holds the most (training activations, a reference or reward-model
// forward, GRPO's generation) and how much, less the KV cache where generation is the peak (its own item).
struct DynamicPeak {
  double bytes = 0, kv_cache = 0;
  std::string phase, name = "activations";
};

// The training phases' peak (GRPO: of its training pass; its generation is EstimateGeneration).
DynamicPeak PeakPhase(const ModelShape& m, const Workload& w, const Strategy& s,
                      const ActivationEstimate& act, int64_t rows, int64_t seq) {
  const int a = w.element_bytes;
  const bool policy_head = w.task != Task::kReward;
  const bool grpo = w.task == Task::kGrpo;
  // A weight's gradient materialises before its bucket copy frees it. The ones that appear while the
  // saved activations are still alive: the untied lm_head (first in backward) and a decoder layer's largest
  // matrix. (The embedding's comes last, when the activations are gone.)
  const double layer_matrix = static_cast<double>(m.hidden_size) * std::max(m.intermediate_size, m.q_size());
  const double head_matrix =
      policy_head && !m.tie_word_embeddings ? static_cast<double>(m.LmHeadParameters()) : 0;
  const double grad_transient =
      s.lora_rank > 0 ? a * 2.0 * m.hidden_size * s.lora_rank : a * std::max(layer_matrix, head_matrix);
  // GRPO's per-token fp32 inputs of the loss, alive through the policy's forward and backward: the old
  // log-probs, the mask and (with a reference) the reference's log-probs, [rows, new_tokens] each.
  const bool ref_forward = ReferenceRunsForward(s.reference);
  const double head_tokens = static_cast<double>(rows) * (grpo ? w.new_tokens : seq);
  const double loss_inputs = grpo ? 4.0 * head_tokens * (2 + (ref_forward ? 1 : 0)) : 0.0;
  DynamicPeak p;
  p.bytes = std::max(act.peak, act.saved + grad_transient) + loss_inputs;
  p.phase = act.peak >= act.saved + grad_transient ? act.phase : "decoder layer backward (weight gradient)";
  const double tokens = static_cast<double>(rows) * seq;
  auto consider = [&p](double bytes, const char* phase, const char* name) {
    if (bytes <= p.bytes) return;
    p.bytes = bytes;
    p.phase = phase;
    p.name = name;
  };
  if (ref_forward) {
    double ref_phase = InferenceForwardBytes(m, tokens, head_tokens, a, true);
    const bool offloaded = s.reference == Reference::kOffloaded;
    if (offloaded) ref_phase += a * static_cast<double>(m.PolicyParameters());
    consider(ref_phase, offloaded ? "reference forward (weights copied in)" : "reference forward",
             "reference forward");
  }
  if (grpo) {  // the old log-probs: a no-grad forward of the policy itself
    consider(InferenceForwardBytes(m, tokens, head_tokens, a, true), "old log-probs forward",
             "old log-probs forward");
  }
  if (w.extra_frozen_models > 0) {
    consider(InferenceForwardBytes(m, tokens, tokens, a, false), "reward-model forward",
             "reward-model forward");
  }
  return p;
}

// GRPO's training pass: micro_batch sequences of prompt + completion, the head over the completion only.
DynamicPeak TrainingPeak(const ModelShape& m, const Workload& w, const Strategy& s, const Hardware& hw,
                         ActivationEstimate* act, int64_t* rows, int64_t* seq) {
  const bool grpo = w.task == Task::kGrpo;
  *rows = (w.task == Task::kReward || w.task == Task::kDpo) ? 2 * s.micro_batch : s.micro_batch;
  *seq = grpo ? w.prompt_len + w.new_tokens : w.seq_len;
  ActivationJob job;
  job.rows = *rows;
  job.seq_len = *seq;
  job.element_bytes = w.element_bytes;
  job.checkpointing = s.checkpointing;
  job.lora_rank = s.lora_rank;
  job.policy_head = w.task != Task::kReward;
  job.head_positions = grpo ? w.new_tokens : -1;
  job.kernels = hw.kernels;
  job.fused_pieces = hw.fused_pieces;
  *act = EstimateActivations(m, job);
  return PeakPhase(m, w, s, *act, *rows, *seq);
}

// Device bytes that every phase of a step holds: weights, gradients, buckets, optimizer state, frozen
// models (the items AddWeightsAndGradients and AddOptimizerAndFrozenModels add).
double StaticDeviceBytes(const ModelShape& m, const Workload& w, const Strategy& s, const Hardware& hw,
                         int world_size) {
  MemoryEstimate est;
  const Items items(&est);
  const BucketLayout buckets = LayoutBuckets(m, w, s, world_size);
  AddWeightsAndGradients(m, w, s, world_size, buckets, items);
  AddOptimizerAndFrozenModels(m, w, s, hw, world_size, buckets, items);
  AddBlasWorkspaces(hw, items);
  double bytes = 0;
  for (const MemoryItem& i : est.device) bytes += i.bytes;
  if (!hw.cpu) bytes += hw.runtime_bytes + (world_size > 1 ? hw.nccl_bytes : 0.0);
  return bytes;
}

}  // namespace

MemoryEstimate EstimateMemory(const ModelShape& m, const Workload& w, const Strategy& s, const Hardware& hw,
                              int world_size) {
  MemoryEstimate est;
  const Items items(&est);
  const int a = w.element_bytes;
  est.trainable_parameters = TrainableParameters(m, w.task, s.lora_rank);
  const BucketLayout buckets = LayoutBuckets(m, w, s, world_size);
  AddWeightsAndGradients(m, w, s, world_size, buckets, items);
  AddOptimizerAndFrozenModels(m, w, s, hw, world_size, buckets, items);
  AddBlasWorkspaces(hw, items);

  // Activations, per phase.
  ActivationEstimate act;
  int64_t rows = 0, seq = 0;
  DynamicPeak peak = TrainingPeak(m, w, s, hw, &act, &rows, &seq);
  if (w.task == Task::kGrpo) {
    const int64_t seqs = s.rollout_prompts * w.samples_per_prompt;
    const GenerationEstimate gen =
        EstimateGeneration(m, seqs, w.prompt_len, w.new_tokens, a, hw.fused_pieces);
    const double f = hw.cpu ? 0.0 : hw.fragmentation;  // as below: fragmentation of the non-cache bytes
    if (gen.kv_cache + (1 + f) * gen.transient > (1 + f) * peak.bytes) {
      peak = DynamicPeak{gen.kv_cache + gen.transient, gen.kv_cache,
                         absl::StrCat("rollout generation (", gen.phase, ")"), "generation transients"};
      peak.bytes -= peak.kv_cache;
      items.Device("KV cache", peak.kv_cache,
                   absl::StrCat("2 x ", m.num_layers, " layers x ", m.kv_size(), " x ", a, " B x ", seqs,
                                " sequences x ", seq, " tokens, + int64 positions"));
    }
  }
  const double logits = peak.name == "activations" ? std::min(act.logits, peak.bytes) : 0.0;
  items.Device(peak.name, peak.bytes - logits,
               absl::StrCat(peak.phase, "; ", rows, " rows x ", seq, " tokens",
                            s.checkpointing ? ", checkpointed" : ""));
  // GRPO's head reads the completions only (TrainingPeak's head_positions), the other tasks' every position.
  const int64_t predicted = rows * (w.task == Task::kGrpo ? w.new_tokens : seq - 1);
  const double chunk_rows =
      LogProbChunkRows(static_cast<double>(m.vocab_size), static_cast<double>(predicted));
  items.Device("log-prob head (chunked fp32 logits)", logits,
               absl::StrCat("chunks of ", static_cast<int64_t>(chunk_rows), " of ", predicted,
                            " predicted positions x ", m.vocab_size, " fp32, the head's weight gradient"));
  est.activation_bytes = peak.bytes;
  est.peak_phase = peak.phase;
  if (!hw.cpu) {
    items.Device("CUDA context + cuDNN workspace", hw.runtime_bytes, "per process");
    if (world_size > 1) items.Device("NCCL buffers", hw.nccl_bytes, "per process");
    items.Device("allocator fragmentation", hw.fragmentation * peak.bytes,
                 absl::StrFormat("%.0f%% of the dynamic bytes", 100 * hw.fragmentation));
  }
  for (const MemoryItem& i : est.device) est.device_bytes += i.bytes;
  for (const MemoryItem& i : est.host) est.host_bytes += i.bytes;
  return est;
}

GenerationEstimate EstimateGeneration(const ModelShape& m, int64_t sequences, int64_t prompt_len,
                                      int64_t new_tokens, int a, bool fused_pieces) {
  const double b = static_cast<double>(sequences), p = static_cast<double>(prompt_len);
  const double c = p + static_cast<double>(new_tokens);  // the cache's capacity
  const double n = b * p;                                // prefill tokens
  const double h = static_cast<double>(m.hidden_size), inter = static_cast<double>(m.intermediate_size);
  const double q = static_cast<double>(m.q_size()), kv = static_cast<double>(m.kv_size());
  const double heads = static_cast<double>(m.num_heads), d = static_cast<double>(m.head_dim);
  const double v = static_cast<double>(m.vocab_size);
  // Grouped-query heads are repeated (copied) for the manual attention; with one query per kv head not.
  const double repeated = m.num_heads > m.num_kv_heads ? 1.0 : 0.0;
  GenerationEstimate g;
  g.kv_cache = 2.0 * m.num_layers * kv * a * b * c + 8.0 * b * c;
  // The prefill step's inputs: int64 ids, positions and clamped positions (24 B per token), each token's
  // rotary cos/sin rows, the [B, P, P] bool mask and the fp32 [P, head_dim] rotary tables.
  const double base = n * (24.0 + 2.0 * d * a) + b * p * p + 8.0 * p * d;
  // Prefill attention of a layer: the residual and its norm, q, k, v, the repeated k/v heads, and per head
  // and key: fp32 the scores and their masked or softmaxed copy (8 B) and one more query-wide tensor as
  // counted; bf16 the scores, their fp32 upcast for the softmax and its fp32 result (10 B).
  const double score_bytes = a == 4 ? 8.0 : 2.0 * a + 6.0;
  const double query_wide = (a == 4 ? 2.0 : 1.0) + 2 * repeated;
  const double attention = base + n * (2 * a * h + query_wide * a * q + 2 * a * kv + score_bytes * heads * p);
  // Prefill MLP: the residual, the attention sum and its norm while gate, silu, up and their product are
  // alive (gate and up are gone by the time down's output is: llama_model.cc's LlamaMlpImpl::forward); the
  // fused gating computes the product without silu's tensor.
  const double mlp = base + n * (3 * a * h + (fused_pieces ? 3 : 4) * a * inter);
  // Sampling a token (SampleTokens, temperature > 0): the fp32 logits, the sorted values, int64 indices,
  // float64 probabilities, the kept prefix (a bool mask: top_k, top_p and min_p alike, no renormalised copy),
  // the kept probabilities and their cdf, and a bool mask, 50 B per entry (the tracking allocator's count,
  // planner_validation_test; 57 until the kept mask replaced the float64 exclusive cumsum), plus 160 B per
  // sequence of per-row tensors.
  const double sampling = b * (50.0 * v + 160.0);
  // A decode step at full length: the repeated k/v heads over the whole cache, its two fp32 score rows, the
  // previous step's logits and the fp32 rotary tables (cos, sin and their source) for every position.
  const double decode = b * (repeated * 2 * a * q * c + 8 * heads * c + 4 * v) + 12.0 * c * d;
  g.transient = std::max({attention, mlp, sampling, decode});
  g.phase = g.transient == attention  ? "prefill attention"
            : g.transient == mlp      ? "prefill MLP"
            : g.transient == sampling ? "sampling"
                                      : "decode attention";
  return g;
}

GrpoPasses EstimateGrpoPasses(const ModelShape& m, const Workload& w, const Strategy& s, const Hardware& hw,
                              int world_size) {
  const double fixed = StaticDeviceBytes(m, w, s, hw, world_size);
  const double fragmentation = hw.cpu ? 0.0 : hw.fragmentation;
  ActivationEstimate act;
  int64_t rows = 0, seq = 0;
  const DynamicPeak train = TrainingPeak(m, w, s, hw, &act, &rows, &seq);
  const GenerationEstimate gen = EstimateGeneration(m, s.rollout_prompts * w.samples_per_prompt, w.prompt_len,
                                                    w.new_tokens, w.element_bytes, hw.fused_pieces);
  GrpoPasses out;
  out.generation = fixed + gen.kv_cache + (1 + fragmentation) * gen.transient;
  out.training = fixed + (1 + fragmentation) * train.bytes;
  out.generation_dynamic = gen.kv_cache + gen.transient;
  out.training_dynamic = train.bytes;
  const double runtime = hw.cpu ? 0.0 : hw.runtime_bytes + (world_size > 1 ? hw.nccl_bytes : 0.0);
  out.generation_tensors = fixed - runtime + out.generation_dynamic;
  out.training_tensors = fixed - runtime + out.training_dynamic;
  out.generation_phase = gen.phase;
  out.training_phase = train.phase;
  return out;
}

}  // namespace zerofit::planner
