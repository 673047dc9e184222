// The decode steps of one generation pass at fixed shapes, optionally recorded once as a CUDA graph and
// replayed for every later token (issue 32: generation speed).
//
// Why: an eager decode step dispatches every operator of every layer from the host, ~12k ATen operators a
// token for a 24-layer model (BENCHMARKS.md, "What a decode step dispatches"); on an H200 that host work,
// ~13 ms a step, was the whole step whatever the batch, and zerofit generated at 0.24x transformers' static
// cache. A CUDA graph replays the recorded kernels with one launch. What a graph needs, this step has:
// every tensor it reads or writes stays at one address for the pass (the KV cache, the input buffers, the
// rotary tables), no shape depends on the step (attention covers every slot of the pass, those not yet
// written masked), and nothing is read back on the host inside it (the slot to write is a device tensor).
//
// Modes (DecodeMode): kEager runs LlamaModelImpl::DecodeStep each token (no StaticDecoder); kStatic runs
// the fixed-shape step eagerly on any device (what the CPU tests compare with kEager); kCudaGraph runs the
// first token's step eagerly on a side stream (its warm-up, which also computes that token), records the
// step as a CUDA graph, and replays it for the others. Sampling stays outside the step, on the host's
// schedule, as in kEager. kAuto, the default, is kCudaGraph where it can run (a CUDA model and a pass the
// fixed tables cover) and kEager elsewhere: on the H200 the graph generated 3.5-3.7x eager's tokens/s with
// the same logits (BENCHMARKS.md, "Issues 32 and 30 on an H200 at 7d5f4cd"); on the CPU, where dispatch is
// not the bottleneck, eager stays.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/torch/model/kv_cache.h"
#include "worker/torch/model/llama_model.h"

namespace zerofit::worker {

enum class DecodeMode { kEager, kStatic, kCudaGraph, kAuto };

// "eager", "static", "cuda_graph", "auto"; an error names `field` and the accepted values.
absl::StatusOr<DecodeMode> ParseDecodeMode(const std::string& text, const std::string& field);
const char* DecodeModeName(DecodeMode mode);

// Whether `mode` can decode a pass of `capacity` positions with `model` (the error names
// GenerationOptions.decode): kCudaGraph needs a CUDA build of LibTorch and the model on a CUDA device; the
// fixed-shape modes need rotary tables that do not change during the pass (not dynamic NTK scaling past
// max_position_embeddings, which rescales with the longest position so far) and no sliding window other
// than Mistral's that the pass exceeds (DecodeStep refuses those too, when it reaches them).
absl::Status StaticDecodeSupported(const LlamaModelImpl& model, DecodeMode mode, int64_t capacity);

// The mode a pass of `capacity` positions runs: kAuto becomes kCudaGraph where StaticDecodeSupported allows
// it, else kEager; the other modes stay as asked.
DecodeMode ResolveDecodeMode(const LlamaModelImpl& model, DecodeMode mode, int64_t capacity);

// The steps after the prompt of one pass. Construct after the prompt's DecodeStep (the cache begun for the
// pass and holding the prompts); destroy before the cache's next Begin. Not thread-safe.
class StaticDecoder {
 public:
  // `mode`: kStatic or kCudaGraph, checked with StaticDecodeSupported by the caller.
  StaticDecoder(LlamaModelImpl& model, KvCache& cache, DecodeMode mode);
  ~StaticDecoder();
  StaticDecoder(const StaticDecoder&) = delete;
  StaticDecoder& operator=(const StaticDecoder&) = delete;

  // Appends one token per row: ids and positions [B, 1] int64 on the host (position -1 for a finished
  // row). Returns the logits [B, vocab] fp32 on the model's device: a buffer that the next Step overwrites.
  // Throws c10::Error when the pass is full or LibTorch fails.
  torch::Tensor Step(const torch::Tensor& ids, const torch::Tensor& positions);

  // Steps that replayed the recorded graph (kCudaGraph; 0 otherwise): the tests' and benchmarks' proof that
  // the graph ran.
  int64_t replays() const { return replays_; }

 private:
  torch::Tensor Run();        // the fixed-shape step on the current stream
  torch::Tensor GraphStep();  // kCudaGraph: the first call warms up and records, later ones replay
#ifdef ZEROFIT_TORCH_CUDA
  torch::Tensor WarmUpAndCapture();
#endif

  LlamaModelImpl& model_;
  KvCache& cache_;
  DecodeMode mode_;
  torch::Tensor inputs_;     // [2B + 1] int64 on the device: ids, positions, slot; one copy a step
  StaticDecodeInputs step_;  // views of inputs_, the slot, the tables
  torch::Tensor logits_;     // kCudaGraph: the recorded step's output
  struct Graph;              // the CUDA graph (defined in a CUDA build only)
  std::unique_ptr<Graph> graph_;
  int64_t replays_ = 0;
};

}  // namespace zerofit::worker
