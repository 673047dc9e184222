#include "cli/local_job_files.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "worker/data/job_files.h"

namespace zerofit::cli {
namespace {

// The spec's fields that name the workers' files, in a plan (the coordinator makes the real one at submit,
// with the same fields copied).
jobspec::JobPlan FileFieldsOf(const jobspec::JobSpec& spec) {
  jobspec::JobPlan p;
  p.task = spec.task;
  p.model = spec.model;
  p.init = spec.init;
  p.data = spec.data;
  p.eval = spec.eval;
  p.grpo = spec.grpo;
  p.checkpoint = spec.checkpoint;
  p.metrics = spec.metrics;
  p.export_dir = spec.export_dir;
  return p;
}

// `s` at `field`'s line of the spec, with the directory a relative `path` is taken from (none: "").
absl::Status AtLine(const absl::Status& s, const std::string& field, const std::string& path,
                    const std::string& yaml_text, const std::string& source) {
  const int line = jobspec::FieldLine(yaml_text, field);
  std::string relative;
  std::error_code ec;
  const std::filesystem::path cwd = std::filesystem::current_path(ec);
  if (!path.empty() && !std::filesystem::path(path).is_absolute() && !ec) {
    relative = absl::StrCat(" (relative to ", cwd.string(), ", where the workers start)");
  }
  return absl::Status(
      s.code(), absl::StrCat(source, line > 0 ? absl::StrCat(":", line) : "", ": ", s.message(), relative));
}

}  // namespace

absl::Status CheckLocalJobFiles(const jobspec::JobSpec& spec, const std::string& yaml_text,
                                const std::string& source) {
  // Rank 0's view: every input and every output.
  return data::CheckJobFiles(FileFieldsOf(spec), 0,
                             [&](const absl::Status& s, const std::string& field, const std::string& path) {
                               return AtLine(s, field, path, yaml_text, source);
                             });
}

}  // namespace zerofit::cli
