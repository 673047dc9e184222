// The ProgressReporter (progress_reporter.h) for this process's standard output: in place where stdout is a
// terminal that can take it (isatty, and TERM set and not "dumb": Emacs' shell and CI logs set TERM=dumb
// or none), erasing with ANSI codes unless NO_COLOR is set (then with spaces: no escape sequence at all);
// a line at a time anywhere else (a pipe, a file). Reads the environment and the terminal's width (at each
// redraw) from the system; the reporter itself stays pure.
#pragma once

#include <cstdint>
#include <memory>

#include "cli/progress_reporter.h"
#include "core/clock.h"

namespace zerofit::cli {

// log_every: the job spec's (jobspec::JobSpec::log_every); 0: about 1% of the steps in the lines.
// `clock` must outlive the reporter.
std::unique_ptr<ProgressReporter> StdoutProgress(int64_t log_every, const core::Clock* clock);

}  // namespace zerofit::cli
