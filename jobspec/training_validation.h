// The one place where the numeric fields of a training section are range-checked, for every way a
// TrainingSpec is written (YAML `training:`, a DeepSpeed JSON config, or both). Products are computed with
// checked arithmetic (core/checked_math.h): micro_batch x gradient_accumulation x world_size must equal
// global_batch exactly, not after wrapping around 64 bits.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "jobspec/job_spec.h"

namespace zerofit::jobspec {

// The largest values accepted. Far beyond any real run; their purpose is that every later product of two
// of them (sizes, step counts, token counts) fits in int64.
inline constexpr int64_t kMaxSteps = int64_t{1} << 32;
inline constexpr int64_t kMaxBatch = int64_t{1} << 24;   // global, micro and accumulation each
inline constexpr int64_t kMaxLength = int64_t{1} << 24;  // tokens per sequence
inline constexpr double kMaxLearningRate = 1e3;          // anything above is a typo, not a schedule

// Builds the error for one field. `field` is the field's name in the YAML form ("training.max_length");
// the callback adds the file, the line where it knows it, and may rename the field (a DeepSpeed key).
using TrainingFieldError = std::function<absl::Status(const std::string& field, const std::string& why)>;

// Checks every numeric field of `t` against its range, and the batch product against `world_size`
// (>= 1). Returns the first violation through `error`.
absl::Status ValidateTraining(const TrainingSpec& t, int world_size, const TrainingFieldError& error);

// With slurm.on_node_loss: shrink, every allowed node count n (fewest_nodes()..nodes) must keep the global
// batch with whole micro-batches: global_batch divisible by (n x ranks per node) x micro_batch (1 when the
// planner sizes it); and 1 <= min_nodes <= nodes. With wait, min_nodes, if given, must equal nodes. Errors
// name "slurm.min_nodes" (the node count that does not fit, and why).
absl::Status ValidateNodeLoss(const TrainingSpec& t, const SlurmSpec& slurm, const TrainingFieldError& error);

// The watchdog's limits (a disabled watchdog is not checked): step_time_factor in [1, kMaxStepTimeFactor],
// floor_s in [1, kMaxWatchdogFloorS]. Fields are named "watchdog.step_time_factor", "watchdog.floor_s".
inline constexpr double kMaxStepTimeFactor = 1e4;
inline constexpr double kMaxWatchdogFloorS = 7 * 24 * 3600;  // a week: longer is no watchdog at all
absl::Status ValidateWatchdog(const WatchdogSpec& w, const TrainingFieldError& error);

}  // namespace zerofit::jobspec
