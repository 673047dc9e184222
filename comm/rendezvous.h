// A rendezvous: a key-value store every rank of a job reaches, used to bootstrap communicators without MPI
// (the NCCL unique id: rank 0 creates it, the others fetch it). In zerofit_worker it is the coordinator's
// Workers.KvPut / KvGet (client/kv_rendezvous.h); tests use an in-memory one.
#pragma once

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace zerofit::comm {

class Rendezvous {
 public:
  virtual ~Rendezvous() = default;
  virtual absl::Status Put(const std::string& key, const std::string& value) = 0;
  // Waits up to `timeout` for `key` to appear: DeadlineExceeded if it does not.
  virtual absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) = 0;
};

// Rank 0 calls `make` and publishes its value under `key`; every other rank waits (up to `timeout`) for it.
// Every rank returns the same bytes. Keys must be fresh per use (include the attempt): a stale value from an
// earlier attempt would be read as the new one.
absl::StatusOr<std::string> ShareFromRankZero(Rendezvous& rendezvous, int rank, const std::string& key,
                                              const std::function<absl::StatusOr<std::string>()>& make,
                                              absl::Duration timeout);

}  // namespace zerofit::comm
