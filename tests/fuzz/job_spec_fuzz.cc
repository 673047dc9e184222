// Fuzz target: the YAML job spec (jobspec::ParseJobSpec), every field's type and range checks. A
// `deepspeed:` path resolves against a directory that does not exist, so no file is read. Seeds:
// corpus/job_spec (examples/ specs and edge cases, written by make_seeds.py).
#include <cstddef>
#include <cstdint>
#include <string>

#include "jobspec/job_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto spec = zerofit::jobspec::ParseJobSpec(text, "fuzz.yaml", "/nonexistent/zerofit-fuzz");
  if (spec.ok() && spec->slurm) (void)zerofit::jobspec::ValidateSlurm(*spec, *spec->slurm, "fuzz.yaml");
  return 0;
}
