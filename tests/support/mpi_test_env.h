// Test-only access to the MpiEnvironment that tests/support/mpi_gtest_main.cc creates for the process.
#pragma once

#include "comm/mpi/mpi_environment.h"

namespace zerofit::testing {

const comm::MpiEnvironment& MpiEnv();

}  // namespace zerofit::testing
