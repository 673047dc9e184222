#include "cli/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/status_macros.h"

extern char** environ;

namespace zerofit::cli {
namespace {

int ExitCode(int wstatus) { return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus); }

// Owns one file descriptor.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { Close(); }
  int get() const { return fd_; }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

// Where `name` is executed from: itself if it holds a '/', else the first executable regular file of that
// name in a directory of PATH (what execvp would run, resolved before the fork).
absl::StatusOr<std::string> ResolveExecutable(const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError("empty command");
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin", ':')) {
    const std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/", name);
    struct stat st;
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return absl::NotFoundError(absl::StrCat("cannot start ", name, ": not found in PATH"));
}

// Everything the child needs, built before the fork: in a multi-threaded process the forked child may only
// make async-signal-safe calls (no allocation) until it execs.
struct ExecPlan {
  std::string path;
  std::vector<std::string> args, env;
  std::vector<char*> argv, envp;
  int output_fd = -1;  // >= 0: the child's stdout and stderr; else inherited
};

absl::StatusOr<ExecPlan> MakePlan(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                                  int output_fd) {
  if (argv.empty()) return absl::InvalidArgumentError("empty command");
  ExecPlan p;
  ZF_ASSIGN_OR_RETURN(p.path, ResolveExecutable(argv[0]));
  p.args = argv;
  p.env = env;
  p.output_fd = output_fd;
  for (std::string& a : p.args) p.argv.push_back(a.data());
  p.argv.push_back(nullptr);
  // The inherited environment without the names `env` sets, then `env`.
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const bool replaced = std::any_of(p.env.begin(), p.env.end(), [&](const std::string& a) {
      const size_t eq = a.find('=');
      return eq != std::string::npos && entry.substr(0, eq + 1) == std::string_view(a).substr(0, eq + 1);
    });
    if (!replaced) p.envp.push_back(*e);
  }
  for (std::string& a : p.env) p.envp.push_back(a.data());
  p.envp.push_back(nullptr);
  return p;
}

// The child between fork and exec: async-signal-safe calls only. Reports exec's errno on `error_fd`.
[[noreturn]] void ExecChild(const ExecPlan& p, int null_fd, int error_fd, pid_t parent) {
  ::setpgid(0, 0);
  // The parent may have died before the prctl: then nobody would send the signal.
  if (::prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || ::getppid() != parent) ::_exit(127);
  struct sigaction dfl;
  dfl.sa_handler = SIG_DFL;
  dfl.sa_flags = 0;
  sigemptyset(&dfl.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGUSR1, SIGUSR2, SIGHUP, SIGPIPE, SIGQUIT})
    ::sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::dup2(null_fd, STDIN_FILENO);
  if (p.output_fd >= 0) {
    ::dup2(p.output_fd, STDOUT_FILENO);
    ::dup2(p.output_fd, STDERR_FILENO);
  }
  ::execve(p.path.c_str(), p.argv.data(), p.envp.data());
  const int err = errno;
  (void)!::write(error_fd, &err, sizeof(err));
  ::_exit(127);
}

absl::StatusOr<pid_t> SpawnWith(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                                int output_fd) {
  ZF_ASSIGN_OR_RETURN(const ExecPlan plan, MakePlan(argv, env, output_fd));
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return absl::ErrnoToStatus(errno, "pipe");
  Fd error_read(fds[0]), error_write(fds[1]);
  Fd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (null.get() < 0) return absl::ErrnoToStatus(errno, "/dev/null");
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot start ", argv[0], ": fork"));
  if (pid == 0) ExecChild(plan, null.get(), error_write.get(), parent);
  // Also here, so that the group exists before the caller can signal it (fails harmlessly after the exec).
  ::setpgid(pid, pid);
  error_write.Close();
  int child_errno = 0;
  ssize_t got;
  while ((got = ::read(error_read.get(), &child_errno, sizeof(child_errno))) < 0 && errno == EINTR) {
  }
  if (got == static_cast<ssize_t>(sizeof(child_errno))) {
    int wstatus = 0;
    while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    return absl::ErrnoToStatus(child_errno, absl::StrCat("cannot start ", argv[0]));
  }
  return pid;
}

}  // namespace

absl::StatusOr<ChildProcess> ChildProcess::Spawn(const std::vector<std::string>& argv,
                                                 const std::vector<std::string>& env) {
  ZF_ASSIGN_OR_RETURN(pid_t pid, SpawnWith(argv, env, -1));
  return ChildProcess(pid);
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept : pid_(other.pid_) { other.pid_ = -1; }

ChildProcess::~ChildProcess() {
  if (pid_ <= 0) return;
  ::kill(-pid_, SIGKILL);
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
  if (pid_ > 0) ::kill(-pid_, sig);
}

absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv, absl::Duration timeout) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return absl::ErrnoToStatus(errno, "pipe");
  Fd out_read(fds[0]), out_write(fds[1]);
  auto pid = SpawnWith(argv, {}, out_write.get());
  out_write.Close();
  if (!pid.ok()) return pid.status();
  ChildProcess child(*pid);
  CommandResult result;
  const absl::Time deadline = absl::Now() + timeout;
  bool eof = false;
  while (!eof) {
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) break;
    struct pollfd p = {out_read.get(), POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    char buf[4096];
    const ssize_t got = ::read(out_read.get(), buf, sizeof(buf));
    if (got > 0) {
      result.output.append(buf, static_cast<size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      eof = true;
    }
  }
  out_read.Close();
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
