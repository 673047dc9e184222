#include "cli/stdout_progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace zerofit::cli {
namespace {

bool EnvSet(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0';
}

}  // namespace

std::unique_ptr<ProgressReporter> StdoutProgress(int64_t log_every, const core::Clock* clock) {
  ProgressOptions o;
  o.log_every = log_every;
  const char* term = std::getenv("TERM");
  const bool terminal =
      ::isatty(STDOUT_FILENO) == 1 && term != nullptr && term[0] != '\0' && std::strcmp(term, "dumb") != 0;
  o.mode = terminal ? ProgressMode::kInPlace : ProgressMode::kLines;
  o.ansi = !EnvSet("NO_COLOR");  // https://no-color.org: no escape sequences
  o.columns = [] {
    struct winsize w {};
    return ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) == 0 ? static_cast<int>(w.ws_col) : 0;
  };
  // Each write reaches the terminal (or the pipe) now: the in-place line has no newline to flush it.
  return std::make_unique<ProgressReporter>(o, clock, [](const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  });
}

}  // namespace zerofit::cli
