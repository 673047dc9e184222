#include "cli/supervise.h"

#include <cstdio>

#include "absl/strings/str_format.h"
#include "core/status_macros.h"

namespace zerofit::cli {
namespace {

void PrintLines(const std::vector<coordinator::LogLine>& lines, int64_t* after, ProgressReporter& progress) {
  for (const coordinator::LogLine& l : lines) {
    progress.JobLine(
        l.text, absl::StrFormat("%s %-16s %s", absl::FormatTime("%H:%M:%S", l.time, absl::LocalTimeZone()),
                                l.source, l.text));
    *after = l.seq;
  }
  std::fflush(stdout);
}

}  // namespace

absl::StatusOr<Supervised> SuperviseJob(JobControl& c, const std::string& id, const SuperviseHooks& hooks) {
  int64_t after = 0;
  if (!hooks.print_earlier_logs) {
    while (true) {
      ZF_ASSIGN_OR_RETURN(auto lines, c.WaitLogs(id, after, absl::ZeroDuration()));
      if (lines.empty()) break;
      after = lines.back().seq;
    }
  }
  // Without a reporter: every line (no step is left out), as before there was one.
  core::RealClock clock;
  ProgressOptions every_line;
  every_line.log_every = 1;
  ProgressReporter all(every_line, &clock, [](const std::string& text) { std::fputs(text.c_str(), stdout); });
  ProgressReporter& progress = hooks.progress ? *hooks.progress : all;
  Supervised out;
  bool stop = false;
  while (!stop) {
    ZF_ASSIGN_OR_RETURN(coordinator::JobRecord job, c.Get(id));
    if (coordinator::IsTerminal(job.status.phase)) break;
    ZF_ASSIGN_OR_RETURN(ChildProcess launcher, ChildProcess::Spawn(hooks.command(), hooks.env));
    std::optional<int> code;
    while (!code) {
      ZF_ASSIGN_OR_RETURN(auto lines, c.WaitLogs(id, after, absl::Milliseconds(300)));
      PrintLines(lines, &after, progress);
      if (hooks.poll) hooks.poll(launcher);
      ZF_ASSIGN_OR_RETURN(code, launcher.Poll());
    }
    out.last_exit_code = *code;
    const AfterExit next = hooks.after_exit ? hooks.after_exit(*code) : AfterExit::kReportAndContinue;
    if (next != AfterExit::kStop) ZF_RETURN_IF_ERROR(c.LauncherExited(id, *code));
    stop = next != AfterExit::kReportAndContinue;
    ZF_ASSIGN_OR_RETURN(auto lines, c.WaitLogs(id, after, absl::ZeroDuration()));
    PrintLines(lines, &after, progress);
  }
  ZF_ASSIGN_OR_RETURN(auto lines, c.WaitLogs(id, after, absl::ZeroDuration()));
  PrintLines(lines, &after, progress);
  ZF_ASSIGN_OR_RETURN(out.job, c.Get(id));
  return out;
}

}  // namespace zerofit::cli
