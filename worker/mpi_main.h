// The `main` of zerofit's MPI programs: initialise MPI, parse flags (a CancelledError carries --help text,
// any other error a usage message; only rank 0 prints), run, and on failure abort the whole job so that no
// rank is left waiting in a collective for its timeout.
#pragma once

#include <cstdio>
#include <string>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/mpi/mpi_environment.h"

namespace zerofit::worker {

// `run` returns absl::Status (exit code 0 on success) or absl::StatusOr<int> (the exit code on success).
template <typename Flags, typename Result>
int MpiMain(int argc, char** argv, absl::StatusOr<Flags> (*parse)(int, char**),
            Result (*run)(const comm::MpiEnvironment&, const Flags&)) {
  auto env = comm::MpiEnvironment::Init(&argc, &argv);
  if (!env.ok()) {
    std::fprintf(stderr, "error: %s\n", env.status().ToString().c_str());
    return 2;
  }
  auto flags = parse(argc, argv);
  if (!flags.ok()) {
    const bool help = flags.status().code() == absl::StatusCode::kCancelled;
    if ((*env)->world_rank() == 0) {
      std::fprintf(help ? stdout : stderr, "%s%s\n",
                   help ? "" : "error: ", std::string(flags.status().message()).c_str());
    }
    return help ? 0 : 2;
  }
  absl::Status s;
  int code = 0;
  if constexpr (std::is_same_v<Result, absl::Status>) {
    s = run(**env, *flags);
  } else {
    Result r = run(**env, *flags);
    s = r.status();
    if (r.ok()) code = *r;
  }
  if (!s.ok()) {
    std::fprintf(stderr, "rank %d: error: %s\n", (*env)->world_rank(), s.ToString().c_str());
    (*env)->AbortJob(1);
  }
  return code;
}

}  // namespace zerofit::worker
