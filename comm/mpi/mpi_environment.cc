#include "comm/mpi/mpi_environment.h"

#include <mpi.h>

#include "comm/mpi/mpi_error.h"
#include "core/status_macros.h"

namespace zerofit::comm {

absl::StatusOr<std::unique_ptr<MpiEnvironment>> MpiEnvironment::Init(int* argc, char*** argv) {
  int initialized = 0;
  ZF_RETURN_IF_ERROR(ZF_MPI_CALL(MPI_Initialized(&initialized)));
  bool owned = false;
  int provided = 0;
  if (!initialized) {
    ZF_RETURN_IF_ERROR(ZF_MPI_CALL(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided)));
    owned = true;
  } else {
    ZF_RETURN_IF_ERROR(ZF_MPI_CALL(MPI_Query_thread(&provided)));
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    if (owned) MPI_Finalize();
    return absl::FailedPreconditionError(
        absl::StrCat("MPI provides thread level ", provided,
                     " but zerofit needs MPI_THREAD_MULTIPLE (communicators progress on their own threads); "
                     "use an MPI library built with thread support"));
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  ZF_RETURN_IF_ERROR(ZF_MPI_CALL(MPI_Comm_rank(MPI_COMM_WORLD, &rank)));
  ZF_RETURN_IF_ERROR(ZF_MPI_CALL(MPI_Comm_size(MPI_COMM_WORLD, &size)));
  return std::unique_ptr<MpiEnvironment>(new MpiEnvironment(owned, rank, size));
}

MpiEnvironment::~MpiEnvironment() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owned_ && !finalized) MPI_Finalize();
}

void MpiEnvironment::AbortJob(int exit_code) const {
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::abort();  // MPI_Abort does not return; this satisfies [[noreturn]] if it ever did.
}

}  // namespace zerofit::comm
