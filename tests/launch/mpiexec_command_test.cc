// launch/mpiexec_command.h: each rank of `zerofit run` gets its own share of the host's CPUs (never Open
// MPI's default of one core a rank, which ran the offload thread pool at one thread's speed), or no binding
// when there are fewer CPUs than ranks. Run for real in offload_affinity_e2e.
#include "launch/mpiexec_command.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace zerofit::launch {
namespace {

using Args = std::vector<std::string>;

TEST(MpiexecCommandTest, EachRankGetsItsShareOfTheCpus) {
  MpiexecLaunch l;
  l.world_size = 2;
  l.host_cpus = 16;
  l.worker = {"/bin/zerofit_worker", "--job", "job-000001"};
  EXPECT_EQ(MpiexecCommand(l),
            (Args{"mpiexec", "--oversubscribe", "--use-hwthread-cpus", "--map-by", "slot:PE=8", "--bind-to",
                  "hwthread", "-n", "2", "/bin/zerofit_worker", "--job", "job-000001"}));
  l.world_size = 3;  // 16 / 3: 5 each, one CPU left over
  l.as_root = true;
  const Args a = MpiexecCommand(l);
  EXPECT_EQ(Args(a.begin(), a.begin() + 9),
            (Args{"mpiexec", "--oversubscribe", "--allow-run-as-root", "--use-hwthread-cpus", "--map-by",
                  "slot:PE=5", "--bind-to", "hwthread", "-n"}));
}

TEST(MpiexecCommandTest, FewerCpusThanRanksBindNothing) {
  MpiexecLaunch l;
  l.mpiexec = "/opt/ompi/bin/mpiexec";
  l.world_size = 4;
  l.host_cpus = 2;
  l.worker = {"w"};
  EXPECT_EQ(MpiexecCommand(l),
            (Args{"/opt/ompi/bin/mpiexec", "--oversubscribe", "--bind-to", "none", "-n", "4", "w"}));
}

}  // namespace
}  // namespace zerofit::launch
