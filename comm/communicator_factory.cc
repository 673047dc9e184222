#include "comm/communicator_factory.h"

#include "absl/strings/str_cat.h"
#include "comm/local/local_communicator.h"
#include "core/status_macros.h"
#ifdef ZEROFIT_HAVE_MPI
#include "comm/mpi/mpi_communicator.h"
#include "comm/mpi/mpi_environment.h"
#endif
#ifdef ZEROFIT_HAVE_NCCL
#include "comm/nccl/nccl_communicator.h"
#endif

namespace zerofit::comm {

const char* BackendName(Backend b) {
  switch (b) {
    case Backend::kLocal:
      return "local";
    case Backend::kMpi:
      return "mpi";
    case Backend::kNccl:
      return "nccl";
  }
  return "unknown";
}

absl::StatusOr<Backend> ParseBackend(const std::string& name) {
  for (Backend b : {Backend::kLocal, Backend::kMpi, Backend::kNccl}) {
    if (name == BackendName(b)) return b;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown communicator backend '", name, "'; expected one of: local, mpi, nccl"));
}

std::vector<Backend> BuiltBackends() {
  std::vector<Backend> out = {Backend::kLocal};
#ifdef ZEROFIT_HAVE_MPI
  out.push_back(Backend::kMpi);
#endif
#ifdef ZEROFIT_HAVE_NCCL
  out.push_back(Backend::kNccl);
#endif
  return out;
}

absl::StatusOr<std::unique_ptr<Communicator>> CreateCommunicator(Backend backend, const CommContext& context,
                                                                 CommOptions options) {
  switch (backend) {
    case Backend::kLocal:
      return std::unique_ptr<Communicator>(std::make_unique<LocalCommunicator>(options));
    case Backend::kMpi:
#ifdef ZEROFIT_HAVE_MPI
      if (context.mpi == nullptr) return absl::InvalidArgumentError("mpi backend needs an MpiEnvironment");
      {
        ZF_ASSIGN_OR_RETURN(auto c, MpiCommunicator::Create(*context.mpi, options));
        return std::unique_ptr<Communicator>(std::move(c));
      }
#else
      return absl::UnimplementedError("this build has no MPI backend (configure with -DZEROFIT_WITH_MPI=ON)");
#endif
    case Backend::kNccl:
#if defined(ZEROFIT_HAVE_NCCL) && defined(ZEROFIT_HAVE_MPI)
      if (context.mpi == nullptr) {
        return absl::InvalidArgumentError("nccl backend needs an MpiEnvironment to bootstrap its unique id");
      }
      {
        ZF_ASSIGN_OR_RETURN(auto bootstrap, MpiCommunicator::Create(*context.mpi, options));
        ZF_ASSIGN_OR_RETURN(auto c,
                            NcclCommunicator::CreateWithBootstrap(*bootstrap, context.cuda_device, options));
        return std::unique_ptr<Communicator>(std::move(c));
      }
#else
      return absl::UnimplementedError(
          "this build has no NCCL backend (needs CUDA + NCCL and MPI for bootstrap at configure time)");
#endif
  }
  return absl::InvalidArgumentError("unknown backend");
}

absl::StatusOr<std::unique_ptr<Communicator>> CreateHostCommunicator(const MpiEnvironment& mpi,
                                                                     CommOptions options) {
  CommContext context;
  context.mpi = &mpi;
#ifdef ZEROFIT_HAVE_MPI
  if (mpi.world_size() > 1) return CreateCommunicator(Backend::kMpi, context, options);
#endif
  return CreateCommunicator(Backend::kLocal, context, options);
}

}  // namespace zerofit::comm
