// The generated sbatch script, whole, for a multi-node GPU job and a CPU job; srun's command line.
#include "launch/sbatch_script.h"

#include <gtest/gtest.h>

namespace zerofit::launch {
namespace {

constexpr const char* kGpuSpec = R"(name: mistral-rm
task: reward
model: /models/mistral-7b
data: /data/prefs
training: {steps: 1000, global_batch: 64}
slurm:
  nodes: 2
  gpus_per_node: 8
  cpus_per_task: 10
  mem: 480G
  time: "04:00:00"
  partition: gpu
  account: rlhf
  signal_seconds: 300
  extra: ["--exclusive"]
)";

TEST(SbatchScriptTest, MultiNodeGpuJob) {
  auto spec = jobspec::ParseJobSpec(kGpuSpec, "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  SbatchPaths p{"/opt/zerofit/bin/zerofit", "/shared/zf/mistral-rm", "/shared/zf/mistral-rm/job.yaml",
                "/home/me", ""};
  EXPECT_EQ(SbatchScript(*spec, *spec->slurm, p),
            R"(#!/bin/bash
# zerofit job 'mistral-rm' (task reward): 2 node(s) x 8 rank(s) = 16 ranks, 1000 steps.
# Written by `zerofit slurm`; submit with `sbatch /shared/zf/mistral-rm/sbatch.sh` (what `zerofit submit --slurm` does).
#SBATCH --job-name=zerofit-mistral-rm
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=10
#SBATCH --mem=480G
#SBATCH --time=04:00:00
#SBATCH --partition=gpu
#SBATCH --account=rlhf
#SBATCH --signal=B:USR1@300
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=/shared/zf/mistral-rm/slurm-%j.out
#SBATCH --chdir=/home/me
#SBATCH --exclusive

# The batch step runs on the first node: the coordinator starts there (its address goes to the state
# directory), then every rank with `srun --mpi=pmix`. SIGUSR1 before the time limit: the ranks
# checkpoint at one common step and exit with code 75, and the job requeues itself (scontrol requeue);
# the next run resumes from that checkpoint.
exec /opt/zerofit/bin/zerofit slurm-launch --state-dir /shared/zf/mistral-rm --spec /shared/zf/mistral-rm/job.yaml
)");
  EXPECT_EQ(
      SrunCommand(16, 2, 10, "/opt/zerofit/bin/zerofit_worker", "gpu01:41234", "/s/token", "job-000001"),
      (std::vector<std::string>{"srun", "--mpi=pmix", "--kill-on-bad-exit=1", "--nodes=2", "--ntasks=16",
                                "--cpus-per-task=10", "/opt/zerofit/bin/zerofit_worker", "--coordinator",
                                "gpu01:41234", "--token-file", "/s/token", "--job", "job-000001"}));
}

TEST(SbatchScriptTest, CpuJobLeavesUnsetFieldsToSlurmAndQuotesPaths) {
  auto spec = jobspec::ParseJobSpec(
      "task: reward\nmodel: m\ndata: d\nslurm: {tasks_per_node: 2, signal_seconds: 0, requeue: false, "
      "coordinator: 'login1:7070'}\n",
      "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::string s =
      SbatchScript(*spec, *spec->slurm,
                   {"/bin/zerofit", "/tmp/my state", "/tmp/my state/job.yaml", "/tmp", "/b/zerofit_worker"});
  EXPECT_NE(s.find("#SBATCH --ntasks-per-node=2\n"), std::string::npos);
  EXPECT_NE(s.find("#SBATCH --no-requeue\n"), std::string::npos);
  for (const char* absent : {"--gpus-per-node", "--mem", "--time", "--partition", "--account", "--signal",
                             "--cpus-per-task", "--qos"}) {
    EXPECT_EQ(s.find(absent), std::string::npos) << absent;
  }
  EXPECT_NE(
      s.find("exec /bin/zerofit slurm-launch --state-dir '/tmp/my state' --spec '/tmp/my state/job.yaml' "
             "--coordinator login1:7070 --worker /b/zerofit_worker\n"),
      std::string::npos)
      << s;
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  // sbatch splits an #SBATCH line at whitespace and takes an unquoted '#' for a comment.
  EXPECT_NE(s.find("#SBATCH --output=\"/tmp/my state/slurm-%j.out\"\n"), std::string::npos) << s;
  EXPECT_EQ(SbatchQuote("/tmp/a#b \"c\"\\d"), "\"/tmp/a#b \\\"c\\\"\\\\d\"");
  EXPECT_EQ(SbatchQuote("/shared/zf/slurm-%j.out"), "/shared/zf/slurm-%j.out");
}

// A job name is free text (no control characters: jobspec::JobNameProblem); on its #SBATCH line, which sbatch
// splits at whitespace, it keeps only what needs no quoting.
TEST(SbatchScriptTest, TheSlurmJobNameKeepsOnlyPlainCharacters) {
  auto spec = jobspec::ParseJobSpec(
      "name: 'rm v2 $(touch /tmp/p) `id`'\ntask: reward\nmodel: m\ndata: d\nslurm: {tasks_per_node: 2}\n",
      "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::string s = SbatchScript(*spec, *spec->slurm, {"/bin/zerofit", "/s", "/s/job.yaml", "/w", ""});
  EXPECT_NE(s.find("\n#SBATCH --job-name=zerofit-rm_v2___touch__tmp_p___id_\n"), std::string::npos) << s;
  EXPECT_EQ(SlurmJobName("Qwen2.5-7B_rm+dpo@v1"), "zerofit-Qwen2.5-7B_rm+dpo@v1");
}

// An external coordinator that serves TLS: its CA and certificate name reach slurm-launch (which passes them
// to every rank).
TEST(SbatchScriptTest, PassesAnExternalCoordinatorsTlsSettingsOn) {
  auto spec = jobspec::ParseJobSpec(
      "task: reward\nmodel: m\ndata: d\nslurm: {tasks_per_node: 1, coordinator: 'login1:7070'}\n",
      "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  SbatchPaths p;
  p.zerofit = "/bin/zerofit";
  p.state_dir = "/s";
  p.spec = "/s/job.yaml";
  p.workdir = "/tmp";
  p.tls_ca = "/etc/zerofit/ca cert.pem";
  p.tls_server_name = "coordinator.internal";
  const std::string s = SbatchScript(*spec, *spec->slurm, p);
  EXPECT_NE(s.find("--coordinator login1:7070 --tls-ca '/etc/zerofit/ca cert.pem' --tls-server-name "
                   "coordinator.internal\n"),
            std::string::npos)
      << s;
}

// slurm.on_node_loss: shrink (issue 20): a node range, so that a requeued job may start on the nodes left;
// srun then starts the allocation's nodes x ranks per node.
constexpr const char* kShrinkSpec = R"(name: rm
task: reward
model: m
data: d
training: {global_batch: 8, micro_batch: 2, gradient_accumulation: 1}
slurm:
  nodes: 2
  tasks_per_node: 2
  on_node_loss: shrink
  min_nodes: 1
)";

TEST(SbatchScriptTest, AShrinkingJobAsksForANodeRange) {
  auto spec = jobspec::ParseJobSpec(kShrinkSpec, "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const SbatchPaths p{"/bin/zerofit", "/s", "/s/job.yaml", "/tmp", ""};
  const std::string s = SbatchScript(*spec, *spec->slurm, p);
  EXPECT_NE(s.find("#SBATCH --nodes=1-2\n#SBATCH --ntasks-per-node=2\n"), std::string::npos) << s;
  // Requeued, the job gets its range back (Slurm keeps the lost allocation's node and task counts).
  EXPECT_EQ(RequeueRangeCommand("scontrol", "17", *spec->slurm),
            (std::vector<std::string>{"scontrol", "update", "JobId=17", "NumNodes=1-2", "NumTasks=2"}));
  // Waiting for every node (the default) asks for exactly `nodes`, and is left alone when requeued.
  jobspec::SlurmSpec wait = *spec->slurm;
  wait.on_node_loss = jobspec::NodeLoss::kWait;
  wait.min_nodes = 0;
  EXPECT_NE(SbatchScript(*spec, wait, p).find("#SBATCH --nodes=2\n"), std::string::npos);
  EXPECT_TRUE(RequeueRangeCommand("scontrol", "17", wait).empty());
}

TEST(SbatchScriptTest, AnAttemptRunsOnTheAllocationsNodesWhenTheJobMayShrink) {
  auto spec = jobspec::ParseJobSpec(kShrinkSpec, "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  SlurmAllocation a;
  a.nodes = 1;  // requeued after node2 was lost: SLURM_JOB_NUM_NODES=1
  auto world = AttemptWorldSize(*spec, a);
  ASSERT_TRUE(world.ok()) << world.status();
  EXPECT_EQ(*world, 2);
  a.tasks = 2;
  EXPECT_EQ(AttemptWorldSize(*spec, a).value_or(0), 2);
  a.nodes = 2;
  a.tasks = 0;
  EXPECT_EQ(AttemptWorldSize(*spec, a).value_or(0), 4);
  a.tasks = 3;
  EXPECT_EQ(std::string(AttemptWorldSize(*spec, a).status().message()),
            "the allocation has 3 tasks (SLURM_NTASKS) but job 'rm' wants world_size 4");
  a.nodes = 3;
  a.tasks = 0;
  EXPECT_EQ(std::string(AttemptWorldSize(*spec, a).status().message()),
            "the allocation has 3 node(s) x 2 ranks = 6 ranks, but job 'rm' runs on 1..2 nodes "
            "(slurm.min_nodes..nodes)");
  // A job that waits for its nodes runs at the spec's world size.
  jobspec::JobSpec wait = *spec;
  wait.slurm->on_node_loss = jobspec::NodeLoss::kWait;
  a.nodes = 1;
  EXPECT_EQ(AttemptWorldSize(wait, a).value_or(0), 4);
}

}  // namespace
}  // namespace zerofit::launch
