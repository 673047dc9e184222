// The MPI communicator that the ZeRO-2 MPI tests train over (zero2_mpi_test.cc, and the test job's:
// zero2_test_job.h).
#pragma once

#include <memory>

#include "absl/time/time.h"
#include "comm/communicator_factory.h"
#include "gtest/gtest.h"
#include "tests/support/mpi_test_env.h"

namespace zerofit::sharding::testjob {

// The MPI communicator over the test's ranks.
inline std::unique_ptr<comm::Communicator> MakeMpi(absl::Duration timeout) {
  comm::CommContext ctx;
  ctx.mpi = &testing::MpiEnv();
  comm::CommOptions options;
  options.timeout = timeout;
  auto c = comm::CreateCommunicator(comm::Backend::kMpi, ctx, options);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

}  // namespace zerofit::sharding::testjob
