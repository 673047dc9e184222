// Dynamic loss scaling for fp16 training (the policy of torch.cuda.amp.GradScaler and DeepSpeed's
// DynamicLossScaler): multiply the loss by `scale`; if any gradient overflowed, skip the step and shrink the
// scale; after `growth_interval` consecutive good steps, grow it. Pure and deterministic: every rank feeds it
// the same all-reduced overflow flag, so all ranks skip the same steps and keep the same scale.
#pragma once

#include <cstdint>

namespace zerofit::sharding {

struct LossScalerOptions {
  bool enabled = false;  // off: scale() is 1 and overflow still skips the step
  float initial_scale = 65536.0f;
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  int growth_interval = 2000;
  float min_scale = 1.0f;
};

// What a checkpoint keeps of the scaler.
struct LossScalerState {
  float scale = 1.0f;
  int good_steps = 0;
  int64_t skipped = 0;
};

class DynamicLossScaler {
 public:
  explicit DynamicLossScaler(const LossScalerOptions& options)
      : options_(options), scale_(options.enabled ? options.initial_scale : 1.0f) {}

  float scale() const { return scale_; }
  int64_t skipped_steps() const { return skipped_; }

  // Records the outcome of one step. Returns true if the step should be applied (no overflow).
  bool Update(bool overflow);

  LossScalerState state() const { return {scale_, good_steps_, skipped_}; }
  void Restore(const LossScalerState& s) {
    scale_ = s.scale;
    good_steps_ = s.good_steps;
    skipped_ = s.skipped;
  }

 private:
  LossScalerOptions options_;
  float scale_;
  int good_steps_ = 0;
  int64_t skipped_ = 0;
};

}  // namespace zerofit::sharding
