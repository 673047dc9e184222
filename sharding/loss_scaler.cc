#include "sharding/loss_scaler.h"

#include <algorithm>

namespace zerofit::sharding {

bool DynamicLossScaler::Update(bool overflow) {
  if (overflow) {
    ++skipped_;
    good_steps_ = 0;
    if (options_.enabled) scale_ = std::max(options_.min_scale, scale_ * options_.backoff_factor);
    return false;
  }
  if (options_.enabled && ++good_steps_ >= options_.growth_interval) {
    scale_ *= options_.growth_factor;
    good_steps_ = 0;
  }
  return true;
}

}  // namespace zerofit::sharding
