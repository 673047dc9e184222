// zerofit_memory_probe: measures the peak per-rank memory of real training steps of one job on the CPU
// (exact tensor bytes, see memory_probe.h) and prints it as JSON, one object per rank 0.
//   mpiexec -n W zerofit_memory_probe --config config.json --task sft|reward|dpo|grpo --micro-batch N
//           --seq-len T [--accumulation K] [--checkpointing] [--lora-rank R]
//           [--ref resident|offloaded|precomputed] [--offload] [--bf16] [--bucket-bytes B] [--steps S]
//           [--plain-pieces] (the plain RMSNorm/SwiGLU graphs: LlamaOptions.lean_pieces off)
//           [--fused-kernels cuda|off|everywhere] (everywhere: the fused nodes on the CPU)
//           grpo: [--prompt-len P] [--new-tokens N] [--samples-per-prompt G] [--rollout-prompts R] [--beta B]
#include <cstdio>
#include <map>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "comm/communicator_factory.h"
#include "core/status_macros.h"
#include "worker/mpi_main.h"
#include "worker/torch/train/memory_probe.h"

namespace zerofit::worker {
namespace {

constexpr const char* kUsage =
    "usage: mpiexec -n W zerofit_memory_probe --config config.json --task sft|reward|dpo|grpo --micro-batch "
    "N "
    "--seq-len T [--accumulation K] [--checkpointing] [--lora-rank R] [--ref resident|offloaded|precomputed] "
    "[--offload] [--bf16] [--bucket-bytes B] [--steps S] [--plain-pieces] [--fused-kernels MODE]; grpo: "
    "[--prompt-len P] "
    "[--new-tokens N] "
    "[--samples-per-prompt G] [--rollout-prompts R] [--beta B] (B > 0: a resident reference)";

absl::StatusOr<int64_t> Int(const std::map<std::string, std::string>& v, const std::string& key,
                            int64_t def) {
  auto it = v.find(key);
  if (it == v.end()) return def;
  int64_t x = 0;
  if (!absl::SimpleAtoi(it->second, &x)) {
    return absl::InvalidArgumentError(absl::StrCat(key, " expects an integer, got '", it->second, "'"));
  }
  return x;
}

absl::StatusOr<ProbeJob> Parse(int argc, char** argv) {
  ProbeJob job;
  std::map<std::string, std::string> v;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") return absl::CancelledError(kUsage);
    if (a == "--checkpointing") {
      job.checkpointing = true;
    } else if (a == "--offload") {
      job.offload = true;
    } else if (a == "--bf16") {
      job.bf16 = true;
    } else if (a == "--plain-pieces") {
      job.plain_pieces = true;
    } else if (a.rfind("--", 0) == 0 && i + 1 < argc) {
      v[a] = argv[++i];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown or incomplete argument '", a, "'\n", kUsage));
    }
  }
  if (!v.count("--config")) return absl::InvalidArgumentError(absl::StrCat("--config is required\n", kUsage));
  ZF_ASSIGN_OR_RETURN(job.model, core::LoadHfConfig(v["--config"]));
  ZF_ASSIGN_OR_RETURN(job.task, planner::ParseTask(v.count("--task") ? v["--task"] : "sft"));
  if (v.count("--ref")) {
    ZF_ASSIGN_OR_RETURN(job.reference, ParseReferenceStrategy(v["--ref"]));
  }
  if (v.count("--fused-kernels")) {
    ZF_ASSIGN_OR_RETURN(job.fused_kernels, ParseFusedKernels(v["--fused-kernels"], "--fused-kernels"));
  }
  ZF_ASSIGN_OR_RETURN(job.micro_batch, Int(v, "--micro-batch", 1));
  ZF_ASSIGN_OR_RETURN(job.seq_len, Int(v, "--seq-len", 32));
  ZF_ASSIGN_OR_RETURN(int64_t acc, Int(v, "--accumulation", 1));
  ZF_ASSIGN_OR_RETURN(job.lora_rank, Int(v, "--lora-rank", 0));
  ZF_ASSIGN_OR_RETURN(int64_t bucket, Int(v, "--bucket-bytes", 1 << 20));
  ZF_ASSIGN_OR_RETURN(int64_t steps, Int(v, "--steps", 2));
  ZF_ASSIGN_OR_RETURN(job.prompt_len, Int(v, "--prompt-len", job.prompt_len));
  ZF_ASSIGN_OR_RETURN(job.new_tokens, Int(v, "--new-tokens", job.new_tokens));
  ZF_ASSIGN_OR_RETURN(job.samples_per_prompt, Int(v, "--samples-per-prompt", job.samples_per_prompt));
  ZF_ASSIGN_OR_RETURN(job.rollout_prompts, Int(v, "--rollout-prompts", job.rollout_prompts));
  if (v.count("--beta") && !absl::SimpleAtod(v["--beta"], &job.grpo_beta)) {
    return absl::InvalidArgumentError(absl::StrCat("--beta expects a number, got '", v["--beta"], "'"));
  }
  job.gradient_accumulation = static_cast<int>(acc);
  job.bucket_bytes = static_cast<size_t>(bucket);
  job.steps = static_cast<int>(steps);
  return job;
}

absl::Status Run(const comm::MpiEnvironment& env, const ProbeJob& job) {
  ZF_ASSIGN_OR_RETURN(auto comm, comm::CreateHostCommunicator(env, comm::CommOptions{}));
  ZF_ASSIGN_OR_RETURN(ProbeResult r, MeasureTrainingPeak(job, comm.get()));
  if (comm->rank() == 0) {
    const sharding::Zero2MemoryStats& z = r.zero2;
    std::printf(
        "{\"device_peak_bytes\": %lld, \"torch_peak_bytes\": %lld, \"torch_static_bytes\": %lld, "
        "\"forward_saved_bytes\": %lld, \"zero2_device_bytes\": %lld, \"host_bytes\": %lld, \"zero2\": "
        "{\"flat_param\": %zu, \"flat_grad\": %zu, \"master\": %zu, \"exp_avg\": %zu, \"exp_avg_sq\": %zu, "
        "\"shard_grad\": %zu, \"staging\": %zu, \"recv\": %zu, \"host_state\": %zu}, "
        "\"generation_peak_bytes\": %lld, \"generation_torch_peak_bytes\": %lld, \"kv_cache_bytes\": %lld}\n",
        static_cast<long long>(r.device_peak_bytes), static_cast<long long>(r.torch_peak_bytes),
        static_cast<long long>(r.torch_static_bytes), static_cast<long long>(r.forward_saved_bytes),
        static_cast<long long>(r.zero2_device_bytes), static_cast<long long>(r.host_bytes),
        z.flat_param_bytes, z.flat_grad_bytes, z.master_bytes, z.exp_avg_bytes, z.exp_avg_sq_bytes,
        z.shard_grad_bytes, z.staging_bytes_peak, z.recv_bytes, z.host_state_bytes,
        static_cast<long long>(r.generation_peak_bytes),
        static_cast<long long>(r.generation_torch_peak_bytes), static_cast<long long>(r.kv_cache_bytes));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace zerofit::worker

int main(int argc, char** argv) {
  return zerofit::worker::MpiMain(argc, argv, &zerofit::worker::Parse, &zerofit::worker::Run);
}
