#include "launch/launch_env.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "launch/hostlist.h"

namespace zerofit::launch {
namespace {

// An optional non-negative integer variable: `*out` unchanged when unset; `*found` says whether it was set.
absl::Status Int(const Getenv& getenv, const char* name, int* out, bool* found = nullptr) {
  const char* v = getenv(name);
  if (found) *found = v != nullptr;
  if (v == nullptr) return absl::OkStatus();
  int x = 0;
  if (!absl::SimpleAtoi(v, &x) || x < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("environment variable ", name, "='", v, "' is not a non-negative integer"));
  }
  *out = x;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LaunchEnv> ReadLaunchEnv(const Getenv& getenv) {
  LaunchEnv e;
  if (const char* id = getenv("SLURM_JOB_ID")) e.slurm_job_id = id;
  ZF_RETURN_IF_ERROR(Int(getenv, "SLURM_RESTART_COUNT", &e.restart_count));

  // srun's view (a step's task).
  LaunchEnv s = e;
  bool slurm_rank = false, slurm_size = false;
  ZF_RETURN_IF_ERROR(Int(getenv, "SLURM_PROCID", &s.rank, &slurm_rank));
  ZF_RETURN_IF_ERROR(Int(getenv, "SLURM_STEP_NUM_TASKS", &s.world_size, &slurm_size));
  const bool in_step = getenv("SLURM_STEP_ID") != nullptr && slurm_rank && slurm_size;
  if (in_step) {
    s.launcher = "srun";
    ZF_RETURN_IF_ERROR(Int(getenv, "SLURM_LOCALID", &s.local_rank));
    ZF_RETURN_IF_ERROR(Int(getenv, "SLURM_NODEID", &s.node_index));
    ZF_RETURN_IF_ERROR(Int(getenv, "SLURM_STEP_NUM_NODES", &s.num_nodes));
    const char* list = getenv("SLURM_STEP_NODELIST");
    if (list == nullptr) list = getenv("SLURM_JOB_NODELIST");
    if (list != nullptr) {
      auto nodes = ExpandHostlist(list);
      if (!nodes.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("environment variable SLURM_STEP_NODELIST: ", nodes.status().message()));
      }
      s.nodes = std::move(*nodes);
    }
    if (s.world_size < 1 || s.rank >= s.world_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("SLURM_PROCID=", s.rank, " is outside SLURM_STEP_NUM_TASKS=", s.world_size));
    }
  }

  // mpiexec's view.
  LaunchEnv m = e;
  bool mpi_rank = false, mpi_size = false;
  ZF_RETURN_IF_ERROR(Int(getenv, "OMPI_COMM_WORLD_RANK", &m.rank, &mpi_rank));
  ZF_RETURN_IF_ERROR(Int(getenv, "OMPI_COMM_WORLD_SIZE", &m.world_size, &mpi_size));
  if (mpi_rank && mpi_size) {
    m.launcher = "mpiexec";
    ZF_RETURN_IF_ERROR(Int(getenv, "OMPI_COMM_WORLD_LOCAL_RANK", &m.local_rank));
    // Open MPI names no node index (OMPI_COMM_WORLD_NODE_RANK is the rank among the processes on this node,
    // like the local rank), and its node count only in ORTE's MCA variable (Open MPI 4).
    m.node_index = -1;
    m.num_nodes = 0;
    ZF_RETURN_IF_ERROR(Int(getenv, "OMPI_MCA_orte_num_nodes", &m.num_nodes));
  }
  // srun launching the ranks directly (--mpi=pmix): Open MPI's variables, if any, say the same.
  if (in_step && (!(mpi_rank && mpi_size) || (m.rank == s.rank && m.world_size == s.world_size))) return s;
  if (mpi_rank && mpi_size) return m;

  LaunchEnv t = e;
  bool torch_rank = false, torch_size = false;
  ZF_RETURN_IF_ERROR(Int(getenv, "RANK", &t.rank, &torch_rank));
  ZF_RETURN_IF_ERROR(Int(getenv, "WORLD_SIZE", &t.world_size, &torch_size));
  if (torch_rank && torch_size) {
    t.launcher = "torchrun";
    ZF_RETURN_IF_ERROR(Int(getenv, "LOCAL_RANK", &t.local_rank));
    ZF_RETURN_IF_ERROR(Int(getenv, "GROUP_RANK", &t.node_index));
    t.num_nodes = 0;
    ZF_RETURN_IF_ERROR(Int(getenv, "GROUP_WORLD_SIZE", &t.num_nodes));
    if (t.num_nodes <= t.node_index) t.node_index = -1;  // a node index without its count: not shown
    return t;
  }
  return e;
}

absl::StatusOr<SlurmAllocation> ReadSlurmAllocation(const Getenv& getenv) {
  SlurmAllocation a;
  const char* id = getenv("SLURM_JOB_ID");
  if (id == nullptr) return absl::FailedPreconditionError("not inside a Slurm allocation (no SLURM_JOB_ID)");
  a.job_id = id;
  if (const char* list = getenv("SLURM_JOB_NODELIST")) a.nodelist = list;
  ZF_RETURN_IF_ERROR(Int(getenv, "SLURM_JOB_NUM_NODES", &a.nodes));
  ZF_RETURN_IF_ERROR(Int(getenv, "SLURM_NTASKS", &a.tasks));
  ZF_RETURN_IF_ERROR(Int(getenv, "SLURM_CPUS_PER_TASK", &a.cpus_per_task));
  ZF_RETURN_IF_ERROR(Int(getenv, "SLURM_RESTART_COUNT", &a.restart_count));
  return a;
}

absl::Status CheckAgainst(const LaunchEnv& env, int rank, int world_size) {
  if (env.launcher == "none") return absl::OkStatus();
  if (env.rank != rank || env.world_size != world_size) {
    return absl::FailedPreconditionError(absl::StrCat(
        env.launcher, " says rank ", env.rank, " of ", env.world_size, " but the communicator says rank ",
        rank, " of ", world_size,
        env.launcher == "srun" ? " (srun needs --mpi=pmix for MPI ranks to match its tasks)" : ""));
  }
  return absl::OkStatus();
}

std::string Describe(const LaunchEnv& e) {
  std::string s = absl::StrCat("rank ", e.rank, " of ", e.world_size, " (local ", e.local_rank);
  if (e.node_index >= 0 && e.num_nodes > 0) {
    absl::StrAppend(&s, ", node ", e.node_index + 1, " of ", e.num_nodes);
    if (static_cast<size_t>(e.node_index) < e.nodes.size()) absl::StrAppend(&s, ": ", e.nodes[e.node_index]);
  } else if (e.num_nodes > 0) {
    absl::StrAppend(&s, ", ", e.num_nodes, e.num_nodes == 1 ? " node" : " nodes");
  }
  absl::StrAppend(&s, "), ", e.launcher);
  if (!e.slurm_job_id.empty()) {
    absl::StrAppend(&s, ", Slurm job ", e.slurm_job_id);
    if (e.restart_count > 0) absl::StrAppend(&s, " (requeued ", e.restart_count, "x)");
  }
  return s;
}

}  // namespace zerofit::launch
