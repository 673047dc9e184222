// One coordinator per state directory. `zerofit serve` holds an exclusive lock on <state-dir>/lock for its
// whole life; a second one on the same directory fails at once, naming the holder, instead of rewriting the
// address file under the first one's workers.
//
// The lock is flock(2) on a file opened O_CLOEXEC: the kernel releases it when the holder exits, however it
// exits (a SIGKILLed coordinator leaves no stale lock to clean up), and no child process inherits it. The
// file holds "pid <PID>\naddress <HOST:PORT>\n" for the error message of the next one; its contents are
// informational, the flock is the lock. The file itself is never removed (removing it would let a second
// process lock a fresh inode while the first still holds the old one).
//
// Thread-safety: none needed; one owner (serve's main thread).
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace zerofit::coordinator {

class StateDirLock {
 public:
  // Locks <dir>/lock and records this process's PID in it. When another process holds it: FailedPrecondition
  // "state directory DIR is in use by another zerofit serve or run (pid PID, address ADDRESS): ...". Never
  // waits.
  static absl::StatusOr<StateDirLock> Acquire(const std::string& dir);

  StateDirLock(StateDirLock&& other) noexcept;
  StateDirLock& operator=(StateDirLock&& other) noexcept;
  StateDirLock(const StateDirLock&) = delete;
  StateDirLock& operator=(const StateDirLock&) = delete;
  ~StateDirLock();  // unlocks (closes the file); the file stays

  // Records the address the coordinator listens on (once it does), for the next one's error message.
  absl::Status SetAddress(const std::string& address);

  const std::string& path() const { return path_; }

 private:
  StateDirLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  absl::Status WriteHolder(const std::string& address);

  int fd_ = -1;
  std::string path_;
};

}  // namespace zerofit::coordinator
