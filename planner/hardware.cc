#include "planner/hardware.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zerofit::planner {
namespace {

struct Gpu {
  const char* name;
  double gb;
  double bf16_tflops;  // dense
  double hbm_tb_s;
  double nvlink_gb_s;  // per GPU, one direction
  double pcie_gb_s;
  double host_gb_per_gpu;  // typical node RAM / GPUs
  // CPU AdamW updates per second (billions) with the host's cores for one GPU. H100 and H200: measured on
  // an H200 machine with 16 cores for its GPU (zerofit's offload pipeline, 16 threads: 219 ms for 0.75B
  // parameters, docs/gpu-runs/2026-11-27-h200-55dadb9.md), as the H100 machines of this project have;
  // the others: Hardware's default, not measured.
  double cpu_adam_gparams_s;
  int compute_capability_major;  // 9 and up: cuBLAS's 32 MiB workspaces (Hardware::blas_workspace_bytes)
};

// Vendor datasheet figures (dense bf16; V100 has no bf16: its fp16 tensor rate).
constexpr Gpu kGpus[] = {
    {"a100-40", 40, 312, 1.56, 300, 25, 128, 1.0, 8}, {"a100-80", 80, 312, 2.04, 300, 25, 256, 1.0, 8},
    {"h100-80", 80, 989, 3.35, 450, 50, 256, 3.4, 9}, {"h200-141", 141, 989, 4.8, 450, 50, 256, 3.4, 9},
    {"v100-32", 32, 125, 0.9, 150, 12, 64, 1.0, 7},   {"rtx4090-24", 24, 165, 1.0, 0, 25, 64, 1.0, 8},
};

}  // namespace

const char* WorkerKernelsName(WorkerKernels k) {
  switch (k) {
    case WorkerKernels::kLibTorch1Eager:
      return "LibTorch 1.x, eager attention";
    case WorkerKernels::kLibTorch2Sdpa:
      return "LibTorch 2.x, scaled-dot-product attention";
  }
  return "?";
}

std::vector<std::string> HardwareNames() {
  std::vector<std::string> n;
  for (const Gpu& g : kGpus) n.push_back(g.name);
  n.push_back("NxMGB (custom, e.g. 8x64GB)");
  n.push_back("cpu");
  return n;
}

absl::StatusOr<Hardware> ParseHardware(const std::string& spec_in, double host_gb) {
  const std::string spec = absl::AsciiStrToLower(spec_in);
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("--hardware '", spec_in, "': ", why,
                                                   " (known: ", absl::StrJoin(HardwareNames(), ", "), ")"));
  };
  Hardware h;
  if (spec == "cpu") {
    h.name = "cpu";
    h.gpus_per_node = 1;
    h.cpu = true;
    h.kernels = WorkerKernels::kLibTorch1Eager;
    h.fused_pieces = false;
    h.runtime_bytes = h.nccl_bytes = h.fragmentation = h.blas_workspace_bytes = 0;
    if (host_gb > 0) h.host_bytes_per_node = host_gb * kGB;
    return h;
  }
  std::string rest = spec;
  int count = 0;
  if (const size_t x = spec.find('x');
      x != std::string::npos && x > 0 && std::all_of(spec.begin(), spec.begin() + x, ::isdigit)) {
    if (!absl::SimpleAtoi(spec.substr(0, x), &count) || count < 1 || count > 64) {
      return bad("the GPU count before 'x' must be 1..64");
    }
    rest = spec.substr(x + 1);
  }
  const Gpu* gpu = nullptr;
  for (const Gpu& g : kGpus) {
    if (rest == g.name || rest == std::string(g.name).substr(0, std::string(g.name).find('-'))) gpu = &g;
  }
  if (gpu != nullptr) {
    h.name = gpu->name;
    h.gpu_bytes = gpu->gb * kGB;
    h.bf16_flops = gpu->bf16_tflops * 1e12;
    h.hbm_bytes_per_s = gpu->hbm_tb_s * 1e12;
    h.intra_node_bytes_per_s = (gpu->nvlink_gb_s > 0 ? gpu->nvlink_gb_s : gpu->pcie_gb_s) * 1e9;
    h.host_link_bytes_per_s = gpu->pcie_gb_s * 1e9;
    h.cpu_adam_params_per_s = gpu->cpu_adam_gparams_s * 1e9;
    if (gpu->compute_capability_major < 9) h.blas_workspace_bytes = 4096.0 * 1024 * 2 + 16 * 1024 * 8;
    h.gpus_per_node = count > 0 ? count : 8;
    h.host_bytes_per_node = gpu->host_gb_per_gpu * h.gpus_per_node * kGB;
  } else if (rest.size() > 2 && rest.substr(rest.size() - 2) == "gb") {
    double gb = 0;
    if (!absl::SimpleAtod(rest.substr(0, rest.size() - 2), &gb) || !(gb >= 1 && gb <= 4096)) {
      return bad("custom GPU memory must be 1..4096 GB");
    }
    h.name = absl::StrCat(gb, "GB");
    h.gpu_bytes = gb * kGB;
    h.gpus_per_node = count > 0 ? count : 8;
    h.host_bytes_per_node = 128 * kGB * h.gpus_per_node;
  } else {
    return bad("unknown GPU");
  }
  h.name = absl::StrCat(h.gpus_per_node, "x", h.name);
  if (host_gb > 0) h.host_bytes_per_node = host_gb * kGB;
  return h;
}

}  // namespace zerofit::planner
