// What the worker loop (worker_loop.h) drives: one rank's training state, stepped from outside.
// LibTorch-free: the torch session (worker/torch/train/torch_training_session.h) implements it for
// zerofit_worker, and tests implement it with a fake that records what the loop asked of it.
//
// Collectives: every method marked collective is called by every rank of the job in the same order with the
// same arguments' shape; a failure on one rank must make the others fail too (their collectives time out or
// abort), never hang them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/metrics/step_metrics.h"

namespace zerofit::worker {

// A rank's micro-batches of one step: indices into the training pairs (an empty micro-batch takes part with
// zero gradients). Every rank has the same number of micro-batches.
using MicroBatches = std::vector<std::vector<uint64_t>>;

class TrainingSession {
 public:
  virtual ~TrainingSession() = default;

  // Tokens of every training pair (prompt + chosen + rejected): what the coordinator's scheduler balances.
  virtual std::vector<int64_t> TrainLengths() const = 0;
  // The data report (counts, lengths, truncation, lints) as lines, shown once per job before the first step.
  virtual std::string DataReportText() const = 0;

  // One optimizer step, 0-based (core/lr_schedule.h). Collective. Returns the step's named metrics
  // (metric_names in step_metrics.h; `step`, `rank` and `wall_time` set). Out of memory is
  // ResourceExhausted: the coordinator re-plans with smaller micro-batches.
  virtual absl::StatusOr<metrics::StepMetrics> Step(int64_t step, const MicroBatches& micro_batches) = 0;
  // The held-out set, on every rank. Collective; changes no training state. The task's values under
  // "eval/" (metric_names::kEvalPrefix), "eval/pairs" included.
  virtual absl::StatusOr<std::vector<metrics::NamedValue>> Evaluate() = 0;

  // A world-size-independent checkpoint of the steps applied so far under `dir` (keeping the `keep` newest),
  // tagged with `extra` (sharding/checkpoint_owner.h). Collective.
  virtual absl::Status SaveCheckpoint(const std::string& dir, const std::string& extra, int keep) = 0;
  // Loads `dir`'s latest checkpoint; returns the number of optimizer steps it had applied. Collective.
  virtual absl::StatusOr<int64_t> LoadCheckpoint(const std::string& dir) = 0;
  // The trained model (safetensors + config.json) into `dir`: rank 0 writes, the others return at once.
  virtual absl::Status Export(const std::string& dir) = 0;
};

}  // namespace zerofit::worker
