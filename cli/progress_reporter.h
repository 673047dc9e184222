// What a person sees of a job's log while it runs (`zerofit run`, `zerofit logs -f`, a Slurm job's output).
// Rank 0 logs a progress line at every step ("step N/M  loss ...  ETA 3m05s", worker/loop/worker_loop.cc);
// printing each would be 10,000 lines for a 10,000-step job. This class decides what is printed:
//  - kInPlace (a terminal): one progress line, redrawn at every step (carriage return, the line cut to the
//    terminal's width so that it never wraps, erase to the end of the line). Every other line (evaluations,
//    alarms, restarts, this program's own messages) first clears it, is printed as a line, and the progress
//    line is drawn again under it. A step line with an evaluation is printed as a line too.
//  - kLines (a pipe, a file): a step line at every log_every-th step (1-based N), the first step and the last
//    (N == M), the first after a restart went back to an earlier step, any that carries an evaluation or a
//    checkpoint, and otherwise the next one once `max_quiet` passed since the last printed (a slow job still
//    shows it is alive); every other line as it comes.
// Finish() (also the destructor) leaves the output on a fresh line: a progress line on screen is ended with
// a newline, and stays as the last state shown.
// Pure: the clock and the output are injected (tests drive it with a FakeClock and a string). Not
// thread-safe: one thread feeds it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/clock.h"

namespace zerofit::cli {

enum class ProgressMode { kLines, kInPlace };

struct ProgressOptions {
  ProgressMode mode = ProgressMode::kLines;
  // kLines: a step line every log_every steps; 0: jobspec::DefaultLogEvery of the total in the lines.
  int64_t log_every = 0;
  absl::Duration max_quiet = absl::Seconds(30);  // kLines: a step line at least this often
  // kInPlace: the terminal's width, asked at each redraw (it may change); the line is cut to one column
  // less. Null or <= 0: not cut.
  std::function<int()> columns;
  // kInPlace: erase with the ANSI "erase to end of line" (ESC [ K); false (NO_COLOR): overwrite with spaces.
  bool ansi = true;
};

// A progress line's step: "step N/M" at the start of the text, N of M 1-based.
struct StepOfJob {
  int64_t step = 0;
  int64_t steps = 0;
};
std::optional<StepOfJob> ParseStepLine(absl::string_view text);

class ProgressReporter {
 public:
  using Sink = std::function<void(const std::string& text)>;

  // `clock` must outlive this; `sink` writes (and flushes) what it is given.
  ProgressReporter(ProgressOptions options, const core::Clock* clock, Sink sink);
  ~ProgressReporter();
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;

  // One of the job's log lines: `text` as logged, `printed` the line as printed (time and source prefixed),
  // without a newline.
  void JobLine(absl::string_view text, absl::string_view printed);
  // A line of this program's own ("zerofit run: SIGINT: ..."), without a newline: always printed.
  void Say(absl::string_view line);
  // Clears the progress line before something else writes to the same terminal (stderr); the next step
  // line draws it again.
  void Clear();
  // Leaves the output on a fresh line (idempotent; lines after it are printed as they come).
  void Finish();

 private:
  bool LinesModePrints(const StepOfJob& s, absl::string_view text);
  void PrintLine(absl::string_view line);  // clears the progress line, prints, draws it again
  void Draw();

  ProgressOptions options_;
  const core::Clock* clock_;
  Sink sink_;
  // kLines
  std::optional<StepOfJob> last_seen_;
  std::optional<absl::Time> last_printed_;
  // kInPlace: the progress line's text, and whether (and how wide) it is on screen now.
  std::string progress_;
  size_t shown_ = 0;
  bool showing_ = false;
};

}  // namespace zerofit::cli
