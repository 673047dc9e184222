#include "cli/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"

extern char** environ;

namespace zerofit::cli {
namespace {

int ExitCode(int wstatus) { return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus); }

// Owns posix_spawn's attribute and file-action objects.
struct SpawnSetup {
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t actions;
  SpawnSetup() {
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_init(&actions);
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    for (int sig : {SIGINT, SIGTERM, SIGUSR1, SIGUSR2, SIGHUP, SIGPIPE}) sigaddset(&defaults, sig);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
};

absl::StatusOr<pid_t> SpawnWith(const std::vector<std::string>& argv, SpawnSetup& setup,
                                const std::vector<std::string>& env = {}) {
  if (argv.empty()) return absl::InvalidArgumentError("empty command");
  std::vector<std::string> copy = argv;
  std::vector<char*> args;
  for (std::string& a : copy) args.push_back(a.data());
  args.push_back(nullptr);
  // The inherited environment without the names `env` sets, then `env`.
  std::vector<std::string> added = env;
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const bool replaced = std::any_of(added.begin(), added.end(), [&](const std::string& a) {
      const size_t eq = a.find('=');
      return eq != std::string::npos && entry.substr(0, eq + 1) == std::string_view(a).substr(0, eq + 1);
    });
    if (!replaced) envp.push_back(*e);
  }
  for (std::string& a : added) envp.push_back(a.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  if (const int rc = ::posix_spawnp(&pid, args[0], &setup.actions, &setup.attr, args.data(), envp.data());
      rc != 0) {
    return absl::ErrnoToStatus(rc, absl::StrCat("cannot start ", argv[0]));
  }
  return pid;
}

}  // namespace

absl::StatusOr<ChildProcess> ChildProcess::Spawn(const std::vector<std::string>& argv,
                                                 const std::vector<std::string>& env) {
  SpawnSetup setup;
  ZF_ASSIGN_OR_RETURN(pid_t pid, SpawnWith(argv, setup, env));
  return ChildProcess(pid);
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept : pid_(other.pid_) { other.pid_ = -1; }

ChildProcess::~ChildProcess() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int wstatus = 0;
  while (::waitpid(pid_, &wstatus, 0) < 0 && errno == EINTR) {
  }
}

absl::StatusOr<std::optional<int>> ChildProcess::Poll() {
  if (pid_ <= 0) return absl::FailedPreconditionError("the child was already reaped");
  int wstatus = 0;
  const pid_t done = ::waitpid(pid_, &wstatus, WNOHANG);
  if (done < 0) return absl::ErrnoToStatus(errno, "waitpid");
  if (done == 0) return std::optional<int>();
  pid_ = -1;
  return std::optional<int>(ExitCode(wstatus));
}

absl::StatusOr<std::optional<int>> ChildProcess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    ZF_ASSIGN_OR_RETURN(std::optional<int> code, Poll());
    if (code || absl::Now() >= deadline) return code;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

void ChildProcess::Signal(int sig) {
  if (pid_ > 0) ::kill(pid_, sig);
}

absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv, absl::Duration timeout) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return absl::ErrnoToStatus(errno, "pipe");
  SpawnSetup setup;
  posix_spawn_file_actions_adddup2(&setup.actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&setup.actions, fds[1], STDERR_FILENO);
  auto pid = SpawnWith(argv, setup);
  ::close(fds[1]);
  if (!pid.ok()) {
    ::close(fds[0]);
    return pid.status();
  }
  ChildProcess child(*pid);
  CommandResult result;
  const absl::Time deadline = absl::Now() + timeout;
  bool eof = false;
  while (!eof) {
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) break;
    struct pollfd p = {fds[0], POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    char buf[4096];
    const ssize_t got = ::read(fds[0], buf, sizeof(buf));
    if (got > 0) {
      result.output.append(buf, static_cast<size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      eof = true;
    }
  }
  ::close(fds[0]);
  ZF_ASSIGN_OR_RETURN(std::optional<int> code,
                      child.Wait(std::max(absl::ZeroDuration(), deadline - absl::Now())));
  if (!code) {
    return absl::DeadlineExceededError(absl::StrCat("'", absl::StrJoin(argv, " "), "' did not finish within ",
                                                    absl::FormatDuration(timeout)));
  }
  result.exit_code = *code;
  return result;
}

}  // namespace zerofit::cli
