// `zerofit run`'s look at a job's files before it starts anything. Its workers run on this host, in this
// directory, so what they will read and write (data/job_files.h: the model's config.json, the initial
// weights, the data, the tokenizer, GRPO's reward models; checkpoint.dir, export, the metrics sinks) can be
// checked here, and a missing input or an output that could not be written is refused at the spec's line,
// instead of by every rank after the launch (or, for the export, after the last step). `zerofit submit`
// cannot: its workers may see other file systems; they check the same files when they start.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "jobspec/job_spec.h"

namespace zerofit::cli {

// The first file problem of `spec`, as "job.yaml:5: field 'model' (the model's config.json):
// base/config.json: No such file or directory", with the directory a relative path was taken from;
// `yaml_text` is the spec's text (for the line), `source` its file name.
absl::Status CheckLocalJobFiles(const jobspec::JobSpec& spec, const std::string& yaml_text,
                                const std::string& source);

}  // namespace zerofit::cli
