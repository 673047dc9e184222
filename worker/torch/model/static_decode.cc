#include "worker/torch/model/static_decode.h"

#include <utility>

#include "absl/strings/str_cat.h"

#ifdef ZEROFIT_TORCH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace zerofit::worker {

struct StaticDecoder::Graph {
#ifdef ZEROFIT_TORCH_CUDA
  at::cuda::CUDAGraph graph;
#endif
};

absl::StatusOr<DecodeMode> ParseDecodeMode(const std::string& text, const std::string& field) {
  for (DecodeMode m : {DecodeMode::kEager, DecodeMode::kStatic, DecodeMode::kCudaGraph, DecodeMode::kAuto}) {
    if (text == DecodeModeName(m)) return m;
  }
  return absl::InvalidArgumentError(absl::StrCat(field, ": '", text.substr(0, 40),
                                                 "' is not a decode mode (eager, static, cuda_graph, auto)"));
}

const char* DecodeModeName(DecodeMode mode) {
  switch (mode) {
    case DecodeMode::kEager:
      return "eager";
    case DecodeMode::kStatic:
      return "static";
    case DecodeMode::kCudaGraph:
      return "cuda_graph";
    case DecodeMode::kAuto:
      return "auto";
  }
  return "?";
}

absl::Status StaticDecodeSupported(const LlamaModelImpl& model, DecodeMode mode, int64_t capacity) {
  const char* field = "GenerationOptions.decode";
  if (mode == DecodeMode::kEager) return absl::OkStatus();
  if (mode == DecodeMode::kAuto) return absl::OkStatus();  // ResolveDecodeMode picks what can run
  const core::HfModelConfig& c = model.config();
  if (mode == DecodeMode::kCudaGraph) {
#ifdef ZEROFIT_TORCH_CUDA
    if (!model.model->embed_tokens->weight.is_cuda())
      return absl::InvalidArgumentError(absl::StrCat(field, ": cuda_graph needs the model on a CUDA device"));
#else
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": cuda_graph needs a CUDA build of LibTorch; this build has none"));
#endif
  }
  if (c.rope_scaling && c.rope_scaling->type == "dynamic" && capacity > c.max_position_embeddings) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", DecodeModeName(mode),
                     " needs rotary tables fixed for the pass, and dynamic NTK scaling ",
                     "rescales them past max_position_embeddings (", c.max_position_embeddings, " < ",
                     capacity, " positions): use eager"));
  }
  if (c.sliding_window && c.model_type != "mistral" && *c.sliding_window < capacity) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": the pass's ", capacity,
                                                   " positions exceed the sliding window (",
                                                   *c.sliding_window, ") of this ", c.model_type, " model"));
  }
  return absl::OkStatus();
}

DecodeMode ResolveDecodeMode(const LlamaModelImpl& model, DecodeMode mode, int64_t capacity) {
  if (mode != DecodeMode::kAuto) return mode;
  return StaticDecodeSupported(model, DecodeMode::kCudaGraph, capacity).ok() ? DecodeMode::kCudaGraph
                                                                             : DecodeMode::kEager;
}

StaticDecoder::StaticDecoder(LlamaModelImpl& model, KvCache& cache, DecodeMode mode)
    : model_(model), cache_(cache), mode_(mode) {
  TORCH_CHECK(mode == DecodeMode::kStatic || mode == DecodeMode::kCudaGraph,
              "StaticDecoder: mode must be static or cuda_graph");
  const torch::Tensor& w = model.model->embed_tokens->weight;
  const int64_t b = cache.batch();
  TORCH_CHECK(b > 0, "StaticDecoder: the cache has no pass begun");
#ifndef ZEROFIT_TORCH_CUDA
  TORCH_CHECK(mode == DecodeMode::kStatic, "StaticDecoder: cuda_graph needs a CUDA build of LibTorch");
#endif
  // [ids (b), positions (b), slot (1)]: one host-to-device copy a step.
  inputs_ = torch::empty({2 * b + 1}, w.options().dtype(torch::kInt64));
  step_.ids = inputs_.slice(0, 0, b).view({b, 1});
  step_.positions = inputs_.slice(0, b, 2 * b).view({b, 1});
  step_.slot = inputs_.slice(0, 2 * b, 2 * b + 1);
  std::pair<torch::Tensor, torch::Tensor> rotary = RotaryCosSin(model.config(), cache.capacity(), w.device());
  step_.cos_table = rotary.first.to(w.scalar_type());
  step_.sin_table = rotary.second.to(w.scalar_type());
}

StaticDecoder::~StaticDecoder() = default;

torch::Tensor StaticDecoder::Step(const torch::Tensor& ids, const torch::Tensor& positions) {
  const int64_t b = cache_.batch();
  TORCH_CHECK(ids.dim() == 2 && ids.size(0) == b && ids.size(1) == 1 && positions.sizes() == ids.sizes(),
              "StaticDecoder: ids and positions must be [", b, ", 1], got ", ids.sizes(), " and ",
              positions.sizes());
  TORCH_CHECK(cache_.length() < cache_.capacity(), "StaticDecoder: the pass is full (", cache_.capacity(),
              " positions)");
  // A fresh pinned buffer each step: the caching host allocator hands a buffer out again only after the
  // copy that reads it has run, so the copy need not be waited for.
  const torch::Tensor host =
      torch::empty({2 * b + 1}, torch::TensorOptions().dtype(torch::kInt64).pinned_memory(inputs_.is_cuda()));
  host.slice(0, 0, b).copy_(ids.reshape({b}));
  host.slice(0, b, 2 * b).copy_(positions.reshape({b}));
  host[2 * b].fill_(cache_.length());
  inputs_.copy_(host, /*non_blocking=*/inputs_.is_cuda());
  torch::Tensor logits = mode_ == DecodeMode::kStatic ? Run() : GraphStep();
  cache_.Advance(1);
  return logits;
}

torch::Tensor StaticDecoder::GraphStep() {
#ifdef ZEROFIT_TORCH_CUDA
  // The rank's GPU current (a rank on cuda:1 need not have made it so): the capture records on the current
  // device, and the side stream, the events and the replay follow it.
  const c10::cuda::CUDAGuard device(inputs_.device());
  if (!graph_) return WarmUpAndCapture();
  graph_->graph.replay();
  ++replays_;
  return logits_;
#else
  TORCH_CHECK(false, "StaticDecoder: cuda_graph needs a CUDA build of LibTorch");
#endif
}

torch::Tensor StaticDecoder::Run() { return model_.DecodeStepAt(step_, cache_); }

#ifdef ZEROFIT_TORCH_CUDA
// As torch.cuda.graph: the warm-up and the capture run on a side stream (capture cannot use the legacy
// default stream, and the warm-up makes cuBLAS set up its handle and workspace for that stream outside the
// capture). The warm-up is a real step: it writes this token's K/V and its logits are this token's. The
// capture records the same step without running it, reading inputs_ and the slot wherever they then hold.
// Capture mode thread-local: another thread's CUDA calls (the offload pool's) do not break the capture.
torch::Tensor StaticDecoder::WarmUpAndCapture() {
  const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream();
  const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  at::cuda::CUDAEvent inputs_ready;
  inputs_ready.record(current);
  inputs_ready.block(side);
  torch::Tensor first;
  {
    const c10::cuda::CUDAStreamGuard guard(side);
    first = Run();
    side.synchronize();
    auto graph = std::make_unique<Graph>();
    try {
      graph->graph.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
      logits_ = Run();
      graph->graph.capture_end();
    } catch (const c10::Error& e) {
      TORCH_CHECK(false, "recording the decode step as a CUDA graph failed (GenerationOptions.decode ",
                  "cuda_graph, or auto on a CUDA device; eager and static need no graph): ",
                  e.what_without_backtrace());
    }
    graph_ = std::move(graph);
  }
  first.record_stream(current);  // read on the current stream (sampling) after the side stream made it
  at::cuda::CUDAEvent done;
  done.record(side);
  done.block(current);
  return first;
}
#endif

}  // namespace zerofit::worker
