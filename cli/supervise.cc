#include "cli/supervise.h"

#include <cstdio>

#include "absl/strings/str_format.h"
#include "core/status_macros.h"

namespace zerofit::cli {
namespace {

void PrintLines(const std::vector<coordinator::LogLine>& lines, int64_t* after) {
  for (const coordinator::LogLine& l : lines) {
    std::printf("%s %-16s %s\n", absl::FormatTime("%H:%M:%S", l.time, absl::LocalTimeZone()).c_str(),
                l.source.c_str(), l.text.c_str());
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
  Supervised out;
  bool stop = false;
  while (!stop) {
    ZF_ASSIGN_OR_RETURN(coordinator::JobRecord job, c.Get(id));
    if (coordinator::IsTerminal(job.status.phase)) break;
    ZF_ASSIGN_OR_RETURN(ChildProcess launcher, ChildProcess::Spawn(hooks.command(), hooks.env));
    std::optional<int> code;
    while (!code) {
      ZF_ASSIGN_OR_RETURN(auto lines, c.WaitLogs(id, after, absl::Milliseconds(300)));
      PrintLines(lines, &after);
      if (hooks.poll) hooks.poll(launcher);
      ZF_ASSIGN_OR_RETURN(code, launcher.Poll());
    }
    out.last_exit_code = *code;
    const AfterExit next = hooks.after_exit ? hooks.after_exit(*code) : AfterExit::kReportAndContinue;
    if (next != AfterExit::kStop) ZF_RETURN_IF_ERROR(c.LauncherExited(id, *code));
    stop = next != AfterExit::kReportAndContinue;
    ZF_ASSIGN_OR_RETURN(auto lines, c.WaitLogs(id, after, absl::ZeroDuration()));
    PrintLines(lines, &after);
  }
  ZF_ASSIGN_OR_RETURN(auto lines, c.WaitLogs(id, after, absl::ZeroDuration()));
  PrintLines(lines, &after);
  ZF_ASSIGN_OR_RETURN(out.job, c.Get(id));
  return out;
}

}  // namespace zerofit::cli
