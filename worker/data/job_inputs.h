// The files a job's workers read before its first step, each with the spec field that named it: the model's
// config.json, the initial weights, the training and held-out data, the tokenizer, GRPO's reward models.
// The workers check them first, so that a missing one is reported with its field whichever front end
// submitted the job; `zerofit run`, whose workers run on this host in this directory, checks them before it
// starts anything and adds the spec's line (cli/run_command.cc). Torch-free.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "jobspec/job_plan.h"
#include "worker/data/training_data.h"

namespace zerofit::data {

// The plan's data and eval sections as the trainer reads them (paths as this process sees them): the
// directory form's token-id files, or the files with the tokenizer (default: the model directory's
// tokenizer.json); eval.data replaces the held-out file. A GRPO plan's directory form reads
// train_prompts_ids.jsonl and test_prompts_ids.jsonl (zerofit_make_arith_prefs --ids).
DataSource DataSourceOf(const jobspec::JobPlan& plan);

struct JobInput {
  std::string field;  // as the spec writes it: "model", "data", "data.train", "eval.data", "rewards[1].path"
  std::string what;   // what the file is to the job: "the model's config.json", "the training pairs"
  std::string path;   // the file the workers open (inside the field's directory for a directory field)
  bool directory_allowed = false;  // `init`: a safetensors file, or a directory holding one or an index
};

// Every input of the plan, in the order the workers read them. Only what is named or implied: the model's
// own weights and tokenizer are optional (used when present) and so are not listed.
std::vector<JobInput> JobInputsOf(const jobspec::JobPlan& plan);

// That `input.path` exists, is not a directory (unless allowed) and is readable by this process; it is not
// opened (a FIFO is not read). NotFound / FailedPrecondition / PermissionDenied naming the field, what the
// file is and the path: "field 'data' (the training pairs): d/train_ids.jsonl: No such file or directory".
absl::Status CheckJobInput(const JobInput& input);

// CheckJobInput over JobInputsOf(plan): the first failure.
absl::Status CheckJobInputs(const jobspec::JobPlan& plan);

}  // namespace zerofit::data
