#include "cli/progress_reporter.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "jobspec/job_spec.h"

namespace zerofit::cli {
namespace {

// What rank 0's progress line carries besides the step (worker/loop/worker_loop.cc, ProgressLine).
constexpr absl::string_view kEvalPart = "  | eval: ";
constexpr absl::string_view kCheckpointPart = "(checkpoint step ";
constexpr absl::string_view kEraseToEnd = "\x1b[K";

// `text` cut to at most `bytes` bytes, not inside a UTF-8 sequence.
absl::string_view CutTo(absl::string_view text, size_t bytes) {
  if (text.size() <= bytes) return text;
  while (bytes > 0 && (static_cast<unsigned char>(text[bytes]) & 0xC0) == 0x80) --bytes;
  return text.substr(0, bytes);
}

}  // namespace

std::optional<StepOfJob> ParseStepLine(absl::string_view text) {
  if (!absl::ConsumePrefix(&text, "step ")) return std::nullopt;
  const size_t slash = text.find('/');
  if (slash == absl::string_view::npos) return std::nullopt;
  size_t end = text.find(' ', slash);
  if (end == absl::string_view::npos) end = text.size();
  StepOfJob s;
  if (!absl::SimpleAtoi(text.substr(0, slash), &s.step) ||
      !absl::SimpleAtoi(text.substr(slash + 1, end - slash - 1), &s.steps) || s.step < 1 || s.steps < 1) {
    return std::nullopt;
  }
  return s;
}

ProgressReporter::ProgressReporter(ProgressOptions options, const core::Clock* clock, Sink sink)
    : options_(std::move(options)), clock_(clock), sink_(std::move(sink)) {}

ProgressReporter::~ProgressReporter() { Finish(); }

void ProgressReporter::JobLine(absl::string_view text, absl::string_view printed) {
  const std::optional<StepOfJob> step = ParseStepLine(text);
  if (!step) {
    PrintLine(printed);
    return;
  }
  if (options_.mode == ProgressMode::kLines) {
    if (LinesModePrints(*step, text)) sink_(absl::StrCat(printed, "\n"));
    return;
  }
  // In place: an evaluation stays on screen as a line; the progress line goes on without it.
  const size_t eval = text.find(kEvalPart);
  progress_ = std::string(text.substr(0, eval));
  if (eval != absl::string_view::npos) {
    PrintLine(printed);
  } else {
    Draw();
  }
}

bool ProgressReporter::LinesModePrints(const StepOfJob& s, absl::string_view text) {
  const int64_t every = options_.log_every > 0 ? options_.log_every : jobspec::DefaultLogEvery(s.steps);
  const absl::Time now = clock_->Now();
  const bool first = !last_seen_ || s.step <= last_seen_->step;  // of the job, or after a restart went back
  const bool notable = absl::StrContains(text, kEvalPart) || absl::StrContains(text, kCheckpointPart);
  const bool quiet = last_printed_ && now - *last_printed_ >= options_.max_quiet;
  const bool print = first || s.step == s.steps || s.step % every == 0 || notable || quiet;
  last_seen_ = s;
  if (print) last_printed_ = now;
  return print;
}

void ProgressReporter::Say(absl::string_view line) { PrintLine(line); }

void ProgressReporter::PrintLine(absl::string_view line) {
  Clear();
  sink_(absl::StrCat(line, "\n"));
  if (options_.mode == ProgressMode::kInPlace && !progress_.empty()) Draw();
}

void ProgressReporter::Draw() {
  const int columns = options_.columns ? options_.columns() : 0;
  const absl::string_view line =
      columns > 1 ? CutTo(progress_, static_cast<size_t>(columns) - 1) : absl::string_view(progress_);
  std::string out = absl::StrCat("\r", line);
  if (options_.ansi) {
    absl::StrAppend(&out, kEraseToEnd);
  } else if (showing_ && shown_ > line.size()) {
    out.append(shown_ - line.size(), ' ');
  }
  sink_(out);
  shown_ = line.size();
  showing_ = true;
}

void ProgressReporter::Clear() {
  if (!showing_) return;
  sink_(options_.ansi ? absl::StrCat("\r", kEraseToEnd) : absl::StrCat("\r", std::string(shown_, ' '), "\r"));
  showing_ = false;
}

void ProgressReporter::Finish() {
  if (showing_) sink_("\n");
  showing_ = false;
  progress_.clear();
}

}  // namespace zerofit::cli
