// gtest main for tests run under `mpiexec -n N`: initialises MPI once, lets only rank 0 print, and makes the
// process exit code reflect this rank's result (mpiexec fails if any rank fails).
#include <gtest/gtest.h>

#include <cstdio>

#include "tests/support/mpi_test_env.h"

namespace zerofit::testing {
namespace {
const comm::MpiEnvironment* g_env = nullptr;  // test harness only: set once in main before any test runs
}
const comm::MpiEnvironment& MpiEnv() { return *g_env; }
}  // namespace zerofit::testing

int main(int argc, char** argv) {
  auto env = zerofit::comm::MpiEnvironment::Init(&argc, &argv);
  if (!env.ok()) {
    std::fprintf(stderr, "MPI init failed: %s\n", env.status().ToString().c_str());
    return 2;
  }
  zerofit::testing::g_env = env->get();
  ::testing::InitGoogleTest(&argc, argv);
  if ((*env)->world_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int rc = RUN_ALL_TESTS();
  if (rc != 0) std::fprintf(stderr, "rank %d: tests FAILED\n", (*env)->world_rank());
  return rc;
}
