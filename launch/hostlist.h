// Slurm host lists ("gpu[01-03,07],login1"), as in SLURM_JOB_NODELIST: expanded into host names in order.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace zerofit::launch {

// Ranges keep their zero padding ("n[08-10]" -> n08 n09 n10). Several bracket groups in one name
// ("rack[1-2]-n[1-2]") expand as a product, left to right. A malformed list is an error naming the position.
absl::StatusOr<std::vector<std::string>> ExpandHostlist(const std::string& list);

}  // namespace zerofit::launch
