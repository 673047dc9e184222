// The choice between NCCL and MPI staged through pinned memory for device buffers, and the GPU of each rank.
#include "comm/device_comm.h"

#include <gtest/gtest.h>

namespace zerofit::comm {
namespace {

TEST(DeviceCommTest, ParsesItsNames) {
  for (DeviceComm c : {DeviceComm::kAuto, DeviceComm::kNccl, DeviceComm::kMpi}) {
    auto parsed = ParseDeviceComm(DeviceCommName(c));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, c);
  }
  auto bad = ParseDeviceComm("gloo");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("auto, nccl, mpi"), std::string::npos);
}

TEST(DeviceCommTest, AutoUsesNcclWithAGpuPerRank) {
  for (int r = 0; r < 8; ++r) {
    auto c = ChooseDeviceComm(DeviceComm::kAuto, r, 8, /*some_rank_lacks_gpu=*/false);
    ASSERT_TRUE(c.ok());
    EXPECT_FALSE(c->staged_mpi);
    EXPECT_EQ(c->cuda_device, r);
  }
}

// Four ranks on a one-GPU machine: every rank on cuda:0 over staged MPI, including rank 0, which has "its"
// GPU but must pick the job's communicator.
TEST(DeviceCommTest, AutoSharesTheGpusWhenRanksOutnumberThem) {
  for (int r = 0; r < 4; ++r) {
    auto c = ChooseDeviceComm(DeviceComm::kAuto, r, 1, /*some_rank_lacks_gpu=*/true);
    ASSERT_TRUE(c.ok());
    EXPECT_TRUE(c->staged_mpi);
    EXPECT_EQ(c->cuda_device, 0);
  }
  auto c = ChooseDeviceComm(DeviceComm::kAuto, 3, 2, true);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->cuda_device, 1);
}

TEST(DeviceCommTest, ExplicitChoices) {
  auto mpi = ChooseDeviceComm(DeviceComm::kMpi, 1, 2, false);
  ASSERT_TRUE(mpi.ok());
  EXPECT_TRUE(mpi->staged_mpi);
  EXPECT_EQ(mpi->cuda_device, 1);
  auto nccl = ChooseDeviceComm(DeviceComm::kNccl, 1, 1, true);
  ASSERT_FALSE(nccl.ok());
  EXPECT_NE(nccl.status().message().find("NCCL refuses two ranks on one GPU"), std::string::npos);
  EXPECT_TRUE(ChooseDeviceComm(DeviceComm::kNccl, 0, 1, true).ok()) << "rank 0 alone has its GPU";
  EXPECT_FALSE(ChooseDeviceComm(DeviceComm::kAuto, 0, 0, false).ok());
}

}  // namespace
}  // namespace zerofit::comm
