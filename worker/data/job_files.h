// The files a job's workers read before its first step and the places they write, each with the spec field
// that named it. Inputs: the model's config.json, the initial weights, the training and held-out data, the
// tokenizer and the chat template that replaces its own, GRPO's reward models. Outputs: checkpoint.dir (every
// rank), export and the metrics sinks (rank 0). The workers check them when they start, so that a missing
// input or an output that could never be written is reported with its field whichever front end submitted the
// job, before the first step rather than when the export after the last one fails; `zerofit run`, whose
// workers run on this host in this directory, checks them before it starts anything and adds the spec's line
// (cli/local_job_files.h).
// Nothing here creates or writes a file, and the checks open none (a FIFO cannot block them). Torch-free.
#pragma once

#include <functional>
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
  std::string what;   // what the file is to the job: "the model's config.json", "the training data"
  std::string path;   // the file the workers open (inside the field's directory for a directory field)
  bool directory_allowed = false;  // `init`, data.chat_template: a file, or a directory holding one
};

// Every input of the plan, in the order the workers read them. Only what is named or implied: the model's
// own weights and tokenizer are optional (used when present) and so are not listed.
std::vector<JobInput> JobInputsOf(const jobspec::JobPlan& plan);

// That `input.path` exists, is not a directory (unless allowed) and is readable by this process; it is not
// opened (a FIFO is not read). NotFound / FailedPrecondition / PermissionDenied naming the field, what the
// file is and the path: "field 'data' (the training data): d/train_ids.jsonl: No such file or directory".
absl::Status CheckJobInput(const JobInput& input);

struct JobOutput {
  std::string field;  // "checkpoint.dir", "export", "metrics.jsonl", "metrics.tensorboard"
  std::string what;
  std::string path;
  bool directory = true;    // metrics.jsonl is a file
  bool every_rank = false;  // checkpoint.dir: each rank writes its shard; the others are rank 0's alone
};

// The places the plan writes (those it names; all are optional).
std::vector<JobOutput> JobOutputsOf(const jobspec::JobPlan& plan);

// That this process could write `output.path` (missing directories are created when first written): the
// path is a writable directory (or file), or does not exist and its nearest existing ancestor is a writable
// directory. FailedPrecondition / PermissionDenied naming the field: "field 'export' (the exported model):
// out/policy: cannot be created: out is a file".
absl::Status CheckJobOutput(const JobOutput& output);

// That the export, which writes `export`/model.safetensors and `export`/config.json, would replace none of
// the plan's inputs (exporting into the model directory would replace the weights every later attempt of
// the job starts from).
absl::Status CheckExportKeepsInputs(const jobspec::JobPlan& plan);

// How a failed check is reported: as it is (the workers), or at the spec's line (zerofit run). `field` is
// the spec's field; `path` the file, empty where the error is about no one file (the export's overlap).
using JobFileError =
    std::function<absl::Status(const absl::Status& error, const std::string& field, const std::string& path)>;

// The inputs, the export's overlap and the outputs `rank` writes (rank 0: all of them): the first failure,
// through `report` when given.
absl::Status CheckJobFiles(const jobspec::JobPlan& plan, int rank, const JobFileError& report = nullptr);

}  // namespace zerofit::data
