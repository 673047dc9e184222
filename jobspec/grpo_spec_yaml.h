// The YAML of a GRPO job's sections (grpo_spec.h): `rollout:`, `grpo:` and `rewards:`, with errors that
// name the file, line and field. Only task grpo may have them.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

#include "absl/status/status.h"
#include "jobspec/grpo_spec.h"
#include "jobspec/yaml_reader.h"

namespace zerofit::jobspec {

// Reads the three sections of `root` into `out` and validates them (ValidateGrpoJobSpec) when `task` is
// grpo; refuses them for any other task.
absl::Status ParseGrpoSections(const YamlReader& r, const YAML::Node& root, const std::string& task,
                               int64_t max_length, GrpoJobSpec* out);

}  // namespace zerofit::jobspec
