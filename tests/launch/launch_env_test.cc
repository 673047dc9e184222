// The launch environment as srun, mpiexec (also inside an allocation) and torchrun set it.
#include "launch/launch_env.h"

#include <gtest/gtest.h>

#include <map>

namespace zerofit::launch {
namespace {

Getenv From(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(LaunchEnvTest, SrunTaskReadsSlurmVariables) {
  auto e = ReadLaunchEnv(From({{"SLURM_JOB_ID", "1234"},
                               {"SLURM_STEP_ID", "0"},
                               {"SLURM_PROCID", "11"},
                               {"SLURM_LOCALID", "3"},
                               {"SLURM_STEP_NUM_TASKS", "16"},
                               {"SLURM_NODEID", "1"},
                               {"SLURM_STEP_NUM_NODES", "2"},
                               {"SLURM_STEP_NODELIST", "gpu[01-02]"},
                               {"SLURM_RESTART_COUNT", "1"},
                               {"PMIX_RANK", "11"}}));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->launcher, "srun");
  EXPECT_EQ(e->rank, 11);
  EXPECT_EQ(e->local_rank, 3);
  EXPECT_EQ(e->world_size, 16);
  EXPECT_EQ(e->node_index, 1);
  EXPECT_EQ(e->num_nodes, 2);
  EXPECT_EQ(e->nodes, (std::vector<std::string>{"gpu01", "gpu02"}));
  EXPECT_EQ(e->slurm_job_id, "1234");
  EXPECT_EQ(e->restart_count, 1);
  EXPECT_EQ(Describe(*e), "rank 11 of 16 (local 3, node 2 of 2: gpu02), srun, Slurm job 1234 (requeued 1x)");
  EXPECT_TRUE(CheckAgainst(*e, 11, 16).ok());
  const absl::Status wrong = CheckAgainst(*e, 0, 1);
  EXPECT_EQ(
      std::string(wrong.message()),
      "srun says rank 11 of 16 but the communicator says rank 0 of 1 (srun needs --mpi=pmix for MPI ranks "
      "to match its tasks)");
}

TEST(LaunchEnvTest, MpiexecInsideAnAllocationWinsOverItsDaemonsStep) {
  // mpiexec in a batch script starts its daemons as a Slurm step with one task per node: Open MPI's
  // variables describe the ranks.
  auto e = ReadLaunchEnv(From({{"SLURM_JOB_ID", "77"},
                               {"SLURM_STEP_ID", "0"},
                               {"SLURM_PROCID", "0"},
                               {"SLURM_STEP_NUM_TASKS", "1"},
                               {"OMPI_COMM_WORLD_RANK", "1"},
                               {"OMPI_COMM_WORLD_SIZE", "2"},
                               {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                               {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                               {"OMPI_COMM_WORLD_NODE_RANK", "1"},
                               {"OMPI_MCA_orte_num_nodes", "1"}}));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->launcher, "mpiexec");
  EXPECT_EQ(e->rank, 1);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->world_size, 2);
  EXPECT_EQ(e->slurm_job_id, "77");
  // OMPI_COMM_WORLD_NODE_RANK is the rank among this node's processes, not a node index: it was shown as
  // "node 2 of 1" for the second rank on one host. Open MPI names only the node count.
  EXPECT_EQ(e->node_index, -1);
  EXPECT_EQ(e->num_nodes, 1);
  EXPECT_EQ(Describe(*e), "rank 1 of 2 (local 1, 1 node), mpiexec, Slurm job 77");
  auto two = ReadLaunchEnv(From({{"OMPI_COMM_WORLD_RANK", "2"},
                                 {"OMPI_COMM_WORLD_SIZE", "4"},
                                 {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                 {"OMPI_MCA_orte_num_nodes", "2"}}));
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(Describe(*two), "rank 2 of 4 (local 0, 2 nodes), mpiexec");
  auto unsaid = ReadLaunchEnv(From({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "4"}}));
  ASSERT_TRUE(unsaid.ok()) << unsaid.status();
  EXPECT_EQ(Describe(*unsaid), "rank 0 of 4 (local 0), mpiexec");
}

TEST(LaunchEnvTest, TorchrunAndNothing) {
  auto t = ReadLaunchEnv(From({{"RANK", "5"},
                               {"WORLD_SIZE", "8"},
                               {"LOCAL_RANK", "1"},
                               {"GROUP_RANK", "2"},
                               {"GROUP_WORLD_SIZE", "4"}}));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->launcher, "torchrun");
  EXPECT_EQ(t->rank, 5);
  EXPECT_EQ(t->local_rank, 1);
  EXPECT_EQ(t->node_index, 2);
  EXPECT_EQ(Describe(*t), "rank 5 of 8 (local 1, node 3 of 4), torchrun");
  // Without GROUP_WORLD_SIZE the count is unknown: no "node 3 of 1".
  auto t2 =
      ReadLaunchEnv(From({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"GROUP_RANK", "2"}}));
  ASSERT_TRUE(t2.ok());
  EXPECT_EQ(Describe(*t2), "rank 5 of 8 (local 1), torchrun");
  auto none = ReadLaunchEnv(From({}));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->launcher, "none");
  EXPECT_EQ(none->world_size, 1);
  EXPECT_TRUE(CheckAgainst(*none, 3, 4).ok()) << "nothing to compare with";
}

TEST(LaunchEnvTest, MalformedVariablesAreNamed) {
  auto e =
      ReadLaunchEnv(From({{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "x"}, {"SLURM_STEP_NUM_TASKS", "2"}}));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(std::string(e.status().message()),
            "environment variable SLURM_PROCID='x' is not a non-negative integer");
  e = ReadLaunchEnv(From({{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "2"}, {"SLURM_STEP_NUM_TASKS", "2"}}));
  ASSERT_FALSE(e.ok());
  e = ReadLaunchEnv(From({{"SLURM_STEP_ID", "0"},
                          {"SLURM_PROCID", "0"},
                          {"SLURM_STEP_NUM_TASKS", "2"},
                          {"SLURM_STEP_NODELIST", "gpu[1-"}}));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(std::string(e.status().message()).find("SLURM_STEP_NODELIST"), std::string::npos);
}

TEST(LaunchEnvTest, TheBatchStepReadsItsAllocation) {
  auto a = ReadSlurmAllocation(From({{"SLURM_JOB_ID", "88"},
                                     {"SLURM_JOB_NUM_NODES", "2"},
                                     {"SLURM_NTASKS", "16"},
                                     {"SLURM_CPUS_PER_TASK", "12"},
                                     {"SLURM_RESTART_COUNT", "3"},
                                     {"SLURM_JOB_NODELIST", "gpu[01-02]"}}));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->nodelist, "gpu[01-02]");
  EXPECT_EQ(a->job_id, "88");
  EXPECT_EQ(a->nodes, 2);
  EXPECT_EQ(a->tasks, 16);
  EXPECT_EQ(a->cpus_per_task, 12);
  EXPECT_EQ(a->restart_count, 3);
  auto minimal = ReadSlurmAllocation(From({{"SLURM_JOB_ID", "89"}}));
  ASSERT_TRUE(minimal.ok());
  EXPECT_EQ(minimal->nodes, 1);
  EXPECT_EQ(minimal->tasks, 0);
  EXPECT_EQ(minimal->nodelist, "");
  EXPECT_EQ(ReadSlurmAllocation(From({})).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(
      std::string(
          ReadSlurmAllocation(From({{"SLURM_JOB_ID", "1"}, {"SLURM_NTASKS", "two"}})).status().message()),
      "environment variable SLURM_NTASKS='two' is not a non-negative integer");
}

}  // namespace
}  // namespace zerofit::launch
