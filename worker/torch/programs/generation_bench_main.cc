// zerofit_generation_bench: zerofit's greedy generation speed (issue 32), the zerofit side of
// bench/transformers_generate_bench.py. One model of a config.json's shape with seeded random weights, a
// batch of random prompts, `--new-tokens` decode steps each (no EOS, so every sequence runs them all) in one
// pass; the median over `--reps` timed runs after `--warmup`. Writes one JSON record.
//
//   zerofit_generation_bench --config config.json [--batch B] [--prompt-len P] [--new-tokens N] [--reps R]
//                            [--warmup W] [--device cpu|cuda] [--dtype fp32|bf16] [--seed S] [--out FILE]
//                            [--decode auto|eager|static|cuda_graph] [--fused-kernels cuda|off|everywhere]
//
// Timing: Generate reads every step's tokens back to the host, so a run's wall time includes the device's
// work without a separate synchronisation. "aten_ops_per_token": the ATen operators one more (untimed) run
// dispatched on this thread (RecordFunction, function scope: composite operators and the views they make
// count too), divided by the new tokens of a sequence. A decode step whose device work is short is bound by
// this host dispatch (docs/gpu-runs/2026-11-27-h200-55dadb9.md). `--decode` picks how the steps after the
// prompt run (static_decode.h); "graph_replays" counts the steps that replayed a CUDA graph: with
// cuda_graph, a replayed step dispatches no operator of the model, only the sampling's.
// `--fused-kernels` is the model's LlamaOptions.fused_kernels: `off` against the default `cuda` is what the
// fused norm, gating and rotary kernels bring to a decode step; `everywhere` runs them on the CPU through
// their host references (the operator count of a fused step without a GPU).
#include <ATen/record_function.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/hf_config.h"
#include "core/status_macros.h"
#include "worker/torch/model/fused_kernels.h"
#include "worker/torch/model/generation.h"
#include "worker/torch/model/kv_cache.h"
#include "worker/torch/model/llama_model.h"
#include "worker/torch/model/static_decode.h"

namespace zerofit::worker {
namespace {

struct Flags {
  std::string config, out, device = "cpu", dtype = "fp32", decode = "auto", fused_kernels = "cuda";
  int64_t batch = 8, prompt_len = 128, new_tokens = 128, reps = 5, warmup = 2, seed = 1;
};

absl::StatusOr<Flags> Parse(int argc, char** argv) {
  Flags f;
  std::map<std::string, int64_t*> ints = {{"--batch", &f.batch},           {"--prompt-len", &f.prompt_len},
                                          {"--new-tokens", &f.new_tokens}, {"--reps", &f.reps},
                                          {"--warmup", &f.warmup},         {"--seed", &f.seed}};
  std::map<std::string, std::string*> strings = {
      {"--config", &f.config}, {"--out", &f.out},       {"--device", &f.device},
      {"--dtype", &f.dtype},   {"--decode", &f.decode}, {"--fused-kernels", &f.fused_kernels}};
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat("flag ", flag, " needs a value"));
    if (auto it = ints.find(flag); it != ints.end()) {
      if (!absl::SimpleAtoi(argv[i + 1], it->second) || *it->second < 0) {
        return absl::InvalidArgumentError(absl::StrCat("flag ", flag, ": '", argv[i + 1], "' is not >= 0"));
      }
    } else if (auto s = strings.find(flag); s != strings.end()) {
      *s->second = argv[i + 1];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag '", flag, "'"));
    }
  }
  if (f.config.empty()) return absl::InvalidArgumentError("--config FILE is required");
  if (f.batch < 1 || f.prompt_len < 1 || f.new_tokens < 1 || f.reps < 1) {
    return absl::InvalidArgumentError("--batch, --prompt-len, --new-tokens and --reps must be >= 1");
  }
  if (f.device != "cpu" && f.device != "cuda") return absl::InvalidArgumentError("--device: cpu or cuda");
  if (f.dtype != "fp32" && f.dtype != "bf16") return absl::InvalidArgumentError("--dtype: fp32 or bf16");
  return f;
}

std::vector<std::vector<int64_t>> RandomPrompts(const Flags& f, int64_t vocab) {
  torch::manual_seed(static_cast<uint64_t>(f.seed) + 1);
  const torch::Tensor ids = torch::randint(3, vocab, {f.batch, f.prompt_len}, torch::kInt64).contiguous();
  std::vector<std::vector<int64_t>> out;
  for (int64_t b = 0; b < f.batch; ++b) {
    const int64_t* row = ids.data_ptr<int64_t>() + b * f.prompt_len;
    out.emplace_back(row, row + f.prompt_len);
  }
  return out;
}

// The ATen operators dispatched on this thread while `fn` runs.
thread_local int64_t g_dispatched = 0;
std::unique_ptr<at::ObserverContext> CountDispatch(const at::RecordFunction&) {
  ++g_dispatched;
  return nullptr;
}
template <typename Fn>
int64_t OperatorsDispatched(Fn fn) {
  const at::CallbackHandle handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(&CountDispatch).scopes({at::RecordScope::FUNCTION}));
  g_dispatched = 0;
  fn();
  at::removeCallback(handle);
  return g_dispatched;
}

absl::Status Run(const Flags& f) {
  ZF_ASSIGN_OR_RETURN(core::HfModelConfig config, core::LoadHfConfig(f.config));
  if (f.device == "cuda" && !torch::cuda::is_available()) {
    return absl::FailedPreconditionError("--device cuda: LibTorch sees no CUDA device");
  }
  const torch::Device device = f.device == "cuda" ? torch::Device("cuda:0") : torch::Device(torch::kCPU);
  LlamaOptions mo;
  mo.dtype = f.dtype == "bf16" ? torch::kBFloat16 : torch::kFloat32;
  ZF_ASSIGN_OR_RETURN(mo.fused_kernels, ParseFusedKernels(f.fused_kernels, "--fused-kernels"));
  torch::manual_seed(static_cast<uint64_t>(f.seed));
  ZF_ASSIGN_OR_RETURN(LlamaModel model, MakeLlamaModel(config, mo));
  model->to(device);
  GenerationOptions go;
  go.max_new_tokens = f.new_tokens;
  go.temperature = 0;
  go.max_batch = f.batch;
  ZF_ASSIGN_OR_RETURN(go.decode, ParseDecodeMode(f.decode, "--decode"));
  const std::vector<std::vector<int64_t>> prompts = RandomPrompts(f, config.vocab_size);
  KvCache cache;
  std::vector<double> ms;
  int64_t generated = 0, replays = 0;
  DecodeMode ran = go.decode;
  for (int64_t r = 0; r < f.warmup + f.reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    ZF_ASSIGN_OR_RETURN(const GenerationResult res, Generate(*model, prompts, go, &cache));
    const double took =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (r >= f.warmup) ms.push_back(took);
    generated = res.stats.tokens_generated;
    replays = res.stats.graph_replays;
    ran = res.stats.decode;
  }
  std::sort(ms.begin(), ms.end());
  const double median = ms[ms.size() / 2];
  absl::Status counted_run;
  const int64_t ops =
      OperatorsDispatched([&] { counted_run = Generate(*model, prompts, go, &cache).status(); });
  ZF_RETURN_IF_ERROR(counted_run);
  const std::string record = absl::StrCat(
      "{\"impl\": \"zerofit\", \"device\": \"", f.device, "\", \"dtype\": \"", f.dtype, "\", \"decode\": \"",
      DecodeModeName(ran), "\", \"fused_kernels\": \"", FusedKernelsName(mo.fused_kernels),
      "\", \"batch\": ", f.batch, ", \"prompt_len\": ", f.prompt_len, ", \"new_tokens\": ", f.new_tokens,
      ", \"reps\": ", f.reps, ", \"median_ms\": ", median, ", \"tokens_per_s\": ", generated / (median / 1e3),
      ", \"kv_cache_bytes\": ", cache.bytes(), ", \"aten_ops_per_token\": ", ops / f.new_tokens,
      ", \"graph_replays\": ", replays, "}\n");
  std::printf("%s", record.c_str());
  if (!f.out.empty()) {
    std::ofstream out(f.out);
    out << record;
    if (!out) return absl::DataLossError(absl::StrCat(f.out, ": write failed"));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace zerofit::worker

int main(int argc, char** argv) {
  absl::StatusOr<zerofit::worker::Flags> flags = zerofit::worker::Parse(argc, argv);
  absl::Status s = flags.ok() ? zerofit::worker::Run(*flags) : flags.status();
  if (!s.ok()) {
    std::fprintf(stderr, "zerofit_generation_bench: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
