#include "jobspec/training_validation.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/checked_math.h"
#include "core/status_macros.h"

namespace zerofit::jobspec {
namespace {

absl::Status IntInRange(const TrainingFieldError& error, const char* field, int64_t v, int64_t lo,
                        int64_t hi) {
  if (v < lo) return error(field, absl::StrCat("must be >= ", lo, ", got ", v));
  if (v > hi) return error(field, absl::StrCat("must be <= ", hi, ", got ", v));
  return absl::OkStatus();
}

// NaN fails every comparison, so each test is written to be false for it.
absl::Status FiniteAtLeast(const TrainingFieldError& error, const char* field, double v, double lo) {
  if (!std::isfinite(v)) return error(field, absl::StrCat("must be a finite number, got ", v));
  if (!(v >= lo)) return error(field, absl::StrCat("must be >= ", lo, ", got ", v));
  return absl::OkStatus();
}

absl::Status ValidateBatch(const TrainingSpec& t, int world_size, const TrainingFieldError& error) {
  if (t.micro_batch) {
    ZF_RETURN_IF_ERROR(IntInRange(error, "training.micro_batch", *t.micro_batch, 1, kMaxBatch));
  }
  if (t.gradient_accumulation) {
    ZF_RETURN_IF_ERROR(
        IntInRange(error, "training.gradient_accumulation", *t.gradient_accumulation, 1, kMaxBatch));
  }
  ZF_RETURN_IF_ERROR(IntInRange(error, "training.global_batch", t.global_batch, 1, kMaxBatch));
  if (t.global_batch % world_size != 0) {  // every rank takes the same share (the planner sizes that share)
    return error("training.global_batch",
                 absl::StrCat(t.global_batch, " is not divisible by world_size ", world_size,
                              ": give a multiple of ", world_size, " (for example ",
                              (t.global_batch / world_size + 1) * world_size, "; 64 when none is given)"));
  }
  if (t.micro_batch && !t.gradient_accumulation && t.global_batch % (*t.micro_batch * world_size) != 0) {
    // Honoured as given (the accumulation follows from it), so it must divide the global batch.
    return error(
        "training.micro_batch",
        absl::StrCat(*t.micro_batch, " per rank x world_size ", world_size, " does not divide global_batch ",
                     t.global_batch, ": give a micro-batch that does, or leave it out for the planner"));
  }
  if (!t.micro_batch || !t.gradient_accumulation) return absl::OkStatus();
  int64_t product = 0;
  if (!core::CheckedProduct({*t.micro_batch, *t.gradient_accumulation, int64_t{world_size}}, &product)) {
    return error("training.global_batch",
                 absl::StrCat("micro_batch x gradient_accumulation x world_size = ", *t.micro_batch, " x ",
                              *t.gradient_accumulation, " x ", world_size, " overflows 64 bits"));
  }
  if (product != t.global_batch) {
    return error(
        "training.global_batch",
        absl::StrCat(t.global_batch, " != micro_batch x gradient_accumulation x world_size = ", product));
  }
  return absl::OkStatus();
}

absl::Status ValidateRates(const TrainingSpec& t, const TrainingFieldError& error) {
  if (!std::isfinite(t.lr) || !(t.lr > 0) || t.lr > kMaxLearningRate) {
    return error("training.lr",
                 absl::StrCat("must be a positive finite number <= ", kMaxLearningRate, ", got ", t.lr));
  }
  ZF_RETURN_IF_ERROR(FiniteAtLeast(error, "training.min_lr", t.min_lr, 0));
  if (t.min_lr > t.lr) return error("training.min_lr", absl::StrCat("must lie in [0, lr = ", t.lr, "]"));
  ZF_RETURN_IF_ERROR(FiniteAtLeast(error, "training.weight_decay", t.weight_decay, 0));
  // 0 turns clipping off (DeepSpeed's gradient_clipping: 0 means the same); infinity is not a norm.
  return FiniteAtLeast(error, "training.max_grad_norm", t.max_grad_norm, 0);
}

}  // namespace

absl::Status ValidateTraining(const TrainingSpec& t, int world_size, const TrainingFieldError& error) {
  if (world_size < 1) return error("world_size", absl::StrCat("must be >= 1, got ", world_size));
  ZF_RETURN_IF_ERROR(IntInRange(error, "training.steps", t.steps, 1, kMaxSteps));
  ZF_RETURN_IF_ERROR(IntInRange(error, "training.warmup_steps", t.warmup_steps, 0, kMaxSteps));
  ZF_RETURN_IF_ERROR(IntInRange(error, "training.decay_steps", t.decay_steps, 0, kMaxSteps));
  ZF_RETURN_IF_ERROR(IntInRange(error, "training.max_length", t.max_length, 1, kMaxLength));
  ZF_RETURN_IF_ERROR(IntInRange(error, "training.zero_stage", t.zero_stage, 0, 2));
  ZF_RETURN_IF_ERROR(IntInRange(error, "training.seed", t.seed, 0, std::numeric_limits<int64_t>::max()));
  if (t.offload && t.zero_stage == 0) {
    return error(
        "training.offload",
        "optimizer offload moves ZeRO's sharded optimizer state to the host: it needs zero_stage 1 or "
        "2, and zero_stage is 0");
  }
  if (t.delayed_update_from) {
    ZF_RETURN_IF_ERROR(
        IntInRange(error, "training.delayed_update_from", *t.delayed_update_from, 0, kMaxSteps));
    if (!t.offload) {
      return error("training.delayed_update_from",
                   "the delayed parameter update is ZeRO-Offload's: it needs training.offload: true");
    }
  }
  ZF_RETURN_IF_ERROR(IntInRange(error, "training.min_8bit_size", t.optimizer.min_8bit_size, 0,
                                std::numeric_limits<int64_t>::max()));
  ZF_RETURN_IF_ERROR(ValidateBatch(t, world_size, error));
  return ValidateRates(t, error);
}

absl::Status ValidateNodeLoss(const TrainingSpec& t, const SlurmSpec& x, const TrainingFieldError& error) {
  if (x.on_node_loss == NodeLoss::kWait) {
    if (x.min_nodes != 0 && x.min_nodes != x.nodes) {
      return error("slurm.min_nodes",
                   absl::StrCat(x.min_nodes, " != slurm.nodes (", x.nodes,
                                "): only a job with on_node_loss: shrink runs on fewer nodes"));
    }
    return absl::OkStatus();
  }
  if (x.min_nodes < 0 || x.min_nodes > x.nodes) {
    return error("slurm.min_nodes",
                 absl::StrCat("must lie in [1, slurm.nodes = ", x.nodes, "], got ", x.min_nodes));
  }
  const int64_t micro = t.micro_batch.value_or(1);
  for (int n = x.fewest_nodes(); n <= x.nodes; ++n) {
    const int64_t world = int64_t{n} * x.ranks_per_node();
    if (t.global_batch % (world * micro) != 0) {
      return error("slurm.min_nodes",
                   absl::StrCat("with on_node_loss: shrink the job may run on ", n, " node(s) = ", world,
                                " ranks, but training.global_batch ", t.global_batch, " is not divisible by ",
                                world, " ranks x micro_batch ", micro,
                                ": raise min_nodes or pick a global batch every allowed world size divides"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateWatchdog(const WatchdogSpec& w, const TrainingFieldError& error) {
  if (!w.enabled) return absl::OkStatus();
  // Below 1 a rank would be hung while merely as slow as the median step; NaN fails both tests.
  if (!(w.step_time_factor >= 1 && w.step_time_factor <= kMaxStepTimeFactor)) {
    return error("watchdog.step_time_factor",
                 absl::StrCat("must be a number in [1, ", kMaxStepTimeFactor, "], got ", w.step_time_factor));
  }
  if (!(w.floor_s >= 1 && w.floor_s <= kMaxWatchdogFloorS)) {
    return error("watchdog.floor_s", absl::StrCat("must be a number of seconds in [1, ", kMaxWatchdogFloorS,
                                                  "], got ", w.floor_s));
  }
  return absl::OkStatus();
}

}  // namespace zerofit::jobspec
