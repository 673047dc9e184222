// Where this process sits in a multi-process launch, read from its launcher's environment:
//   srun       SLURM_PROCID, SLURM_LOCALID, SLURM_STEP_NUM_TASKS, SLURM_NODEID, SLURM_STEP_NUM_NODES,
//              SLURM_STEP_NODELIST (or SLURM_JOB_NODELIST), SLURM_JOB_ID, SLURM_RESTART_COUNT
//   mpiexec    OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_SIZE,
//              OMPI_MCA_orte_num_nodes (Open MPI, which names no node index; also when mpiexec runs inside a
//              Slurm allocation: its daemons are a Slurm step of their own, so Open MPI's variables win where
//              the two disagree)
//   torchrun   RANK, LOCAL_RANK, WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE
// The local rank picks the GPU; the communicator's own rank and size must agree (CheckAgainst).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace zerofit::launch {

struct LaunchEnv {
  std::string launcher = "none";  // srun | mpiexec | torchrun | none
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int node_index = 0;              // -1: the launcher does not say (mpiexec)
  int num_nodes = 1;               // 0: the launcher does not say
  std::vector<std::string> nodes;  // srun: the step's hosts, expanded from the node list
  std::string slurm_job_id;        // set inside any Slurm allocation
  int restart_count = 0;           // SLURM_RESTART_COUNT: how often the Slurm job was requeued
};

// `getenv` returns null for an unset variable (std::getenv in production, a map in tests). Malformed values
// are errors naming the variable.
using Getenv = std::function<const char*(const char*)>;
absl::StatusOr<LaunchEnv> ReadLaunchEnv(const Getenv& getenv);

// The batch step's view of its Slurm allocation (sbatch's variables SLURM_JOB_ID, SLURM_JOB_NUM_NODES,
// SLURM_NTASKS, SLURM_CPUS_PER_TASK, SLURM_RESTART_COUNT, SLURM_JOB_NODELIST). FailedPrecondition outside an
// allocation.
struct SlurmAllocation {
  std::string job_id;
  std::string nodelist;  // as Slurm writes it ("node[1-2]"); empty if not set
  int nodes = 1;
  int tasks = 0;          // 0: not set
  int cpus_per_task = 0;  // 0: not set
  int restart_count = 0;
};
absl::StatusOr<SlurmAllocation> ReadSlurmAllocation(const Getenv& getenv);

// The launcher's view must match the communicator's (a mismatch means a mis-launched job: wrong --mpi, a
// wrong task count).
absl::Status CheckAgainst(const LaunchEnv& env, int rank, int world_size);

// "rank 3 of 16 (local 3, node 1 of 2: gpu02), srun, Slurm job 1234 (requeued 1x)";
// "rank 1 of 2 (local 1, 1 node), mpiexec" where the launcher names no node index.
std::string Describe(const LaunchEnv& env);

}  // namespace zerofit::launch
