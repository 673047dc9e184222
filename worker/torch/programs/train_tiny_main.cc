// zerofit_train_tiny: trains the tiny transformer on a synthetic, learnable next-token task with ZeRO-2 on
// every MPI rank (optionally with optimizer offload and the delayed update), printing per step the loss,
// throughput, ETA and where the step's time went (compute, reduce-scatter, D2H, CPU AdamW, H2D, all-gather,
// idle). Run: mpiexec -n 2 zerofit_train_tiny --offload --threads 1
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "comm/communicator_factory.h"
#include "comm/mpi/mpi_environment.h"
#include "core/status_macros.h"
#include "worker/mpi_main.h"
#include "worker/torch/model/tiny_transformer.h"
#include "worker/torch/train/zero2_binding.h"

namespace zerofit::worker {
namespace {

struct Flags {
  int steps = 30, micro = 2, batch = 16, seq = 33, dim = 128, layers = 4, vocab = 64, threads = 1;
  int dpu_start = 40;
  float lr = 3e-3f;
  size_t bucket_kb = 256;
  bool offload = false, delayed = false, reduce_once = false;
};

absl::StatusOr<Flags> ParseFlags(int argc, char** argv) {
  Flags f;
  std::map<std::string, int*> ints = {
      {"--steps", &f.steps}, {"--micro", &f.micro},   {"--batch", &f.batch}, {"--seq", &f.seq},
      {"--dim", &f.dim},     {"--layers", &f.layers}, {"--vocab", &f.vocab}, {"--threads", &f.threads}};
  std::map<std::string, int*> non_negative = {{"--dpu-start", &f.dpu_start}};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      return absl::CancelledError(
          "usage: mpiexec -n W zerofit_train_tiny [--steps N] [--micro K] [--batch B] [--seq S] [--dim D] "
          "[--layers L] [--vocab V] [--lr LR] [--bucket-kb KB] [--offload] [--threads T] [--delayed-update] "
          "[--dpu-start N] [--reduce-once]");
    }
    if (a == "--offload") {
      f.offload = true;
    } else if (a == "--delayed-update") {
      f.delayed = f.offload = true;
    } else if (a == "--reduce-once") {
      f.reduce_once = true;
    } else if (ints.count(a) && i + 1 < argc) {
      *ints[a] = std::atoi(argv[++i]);
      if (*ints[a] <= 0) return absl::InvalidArgumentError(absl::StrCat(a, " must be a positive integer"));
    } else if (non_negative.count(a) && i + 1 < argc) {
      *non_negative[a] = std::atoi(argv[++i]);
      if (*non_negative[a] < 0) return absl::InvalidArgumentError(absl::StrCat(a, " must be >= 0"));
    } else if (a == "--lr" && i + 1 < argc) {
      f.lr = std::strtof(argv[++i], nullptr);
    } else if (a == "--bucket-kb" && i + 1 < argc) {
      f.bucket_kb = std::strtoul(argv[++i], nullptr, 10);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown or incomplete flag '", a,
          "'; flags: --steps --micro --batch --seq --dim --layers --vocab --threads --lr --bucket-kb "
          "--offload --delayed-update --dpu-start --reduce-once"));
    }
  }
  if (f.batch % f.micro != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--batch ", f.batch, " is not a multiple of --micro ", f.micro));
  }
  return f;
}

// Sequences a, a+d, a+2d, ... (mod vocab): the next token follows from the previous two.
torch::Tensor SyntheticBatch(int64_t n, int64_t seq, int64_t vocab, torch::Generator& gen) {
  torch::Tensor a = torch::randint(vocab, {n, 1}, gen, torch::kLong);
  torch::Tensor d = torch::randint(1, 5, {n, 1}, gen, torch::kLong);
  return (a + d * torch::arange(seq, torch::kLong).unsqueeze(0)).remainder(vocab);
}

absl::Status Run(const comm::MpiEnvironment& env, const Flags& f) {
  torch::set_num_threads(1);
  ZF_ASSIGN_OR_RETURN(auto comm, comm::CreateHostCommunicator(env));
  torch::manual_seed(0);
  TinyTransformer model(f.vocab, f.dim, f.layers);
  sharding::Zero2Options o;
  o.bucket_bytes = f.bucket_kb << 10;
  o.accumulation_mode = f.reduce_once ? sharding::AccumulationMode::kReduceOncePerStep
                                      : sharding::AccumulationMode::kReduceScatterEveryMicroBatch;
  o.max_grad_norm = 1.0f;
  o.offload.enabled = f.offload;
  o.offload.threads = f.threads;
  o.offload.delayed_update_from = f.delayed ? f.dpu_start : -1;
  ZF_ASSIGN_OR_RETURN(auto binding, Zero2Binding::Bind(*model, o, comm.get()));
  auto& opt = binding->optimizer();
  const int rank = comm->rank(), world = comm->world_size();
  if (rank == 0) {
    const auto mem = opt.memory();
    std::printf(
        "zerofit_train_tiny: %d ranks, %zu parameters, %s%s%s, optimizer state %.2f MiB/rank, pinned "
        "%.2f MiB/rank%s\n",
        world, opt.plan().numel(), sharding::AccumulationModeName(o.accumulation_mode),
        f.offload ? absl::StrCat(", offload (", f.threads, " CPU AdamW threads, ",
                                 optim::SimdLevelName(o.offload.simd), ")")
                        .c_str()
                  : "",
        f.delayed ? absl::StrCat(", delayed update from step ", f.dpu_start).c_str() : "",
        mem.optimizer_state_bytes() / 1048576.0, mem.pinned_bytes / 1048576.0,
        opt.pin_status().ok() ? "" : absl::StrCat(" (", opt.pin_status().message(), ")").c_str());
  }
  torch::Generator gen = torch::make_generator<torch::CPUGeneratorImpl>(1234 + rank);
  const int per_micro = f.batch / f.micro;
  const absl::Time start = absl::Now();
  for (int step = 1; step <= f.steps; ++step) {
    double loss_sum = 0, tokens = 0;
    for (int k = 0; k < f.micro; ++k) {
      torch::Tensor batch = SyntheticBatch(per_micro, f.seq, f.vocab, gen);
      const absl::Time t0 = absl::Now();
      torch::Tensor loss = model->LossSum(batch);
      opt.profile()->Record(sharding::Stage::kForward, t0, absl::Now());
      const double units = static_cast<double>(per_micro) * (f.seq - 1);
      ZF_RETURN_IF_ERROR(binding->Backward(loss, k == f.micro - 1, units));
      loss_sum += loss.item<double>();
      tokens += units;
    }
    ZF_ASSIGN_OR_RETURN(sharding::StepResult r, binding->Step(f.lr));
    double report[2] = {loss_sum, tokens};
    ZF_RETURN_IF_ERROR(
        comm::WaitFor(comm->AllReduce(comm::Buffer{report, 2, core::DType::kFloat64}, comm::ReduceOp::kSum),
                      absl::Minutes(1)));
    if (rank == 0) {
      const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
      std::printf("step %3d/%d  loss %.4f  grad-norm %.3f  %.0f tok/s  ETA %.0fs | %s\n", step, f.steps,
                  report[0] / report[1], r.grad_norm, report[1] / (r.breakdown.wall_ms / 1e3),
                  elapsed / step * (f.steps - step), r.breakdown.ToString().c_str());
      std::fflush(stdout);
    }
  }
  return opt.Flush();
}

}  // namespace
}  // namespace zerofit::worker

int main(int argc, char** argv) {
  return zerofit::worker::MpiMain(argc, argv, &zerofit::worker::ParseFlags, &zerofit::worker::Run);
}
