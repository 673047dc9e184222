// What a checkpoint save may delete: only folders marked with its owner (core/dir_owner.h); never a link,
// never a marker that is a link or a FIFO (read without following or blocking).
#include "sharding/checkpoint_rotation.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/dir_owner.h"
#include "tests/support/temp_dir.h"

namespace zerofit::sharding {
namespace {

namespace fs = std::filesystem;

const core::DirOwner kOurs{"job-000001", "run-1"};

class CheckpointRotationTest : public ::testing::Test {
 protected:
  fs::path Folder(const std::string& name, const core::DirOwner* owner) {
    const fs::path d = fs::path(dir_.path()) / name;
    fs::create_directories(d);
    std::ofstream(d / "data") << "x";
    if (owner != nullptr) {
      EXPECT_TRUE(core::WriteDirOwner(d.string(), *owner).ok());
    }
    return d;
  }
  test_support::TempDir dir_{"zerofit_rotation"};
};

TEST_F(CheckpointRotationTest, OwnerMarkerRoundTripsAndOddMarkersAreNotOurs) {
  const fs::path d = Folder("a", &kOurs);
  auto owner = core::ReadDirOwner(d.string());
  ASSERT_TRUE(owner.ok()) << owner.status();
  EXPECT_EQ(*owner, kOurs);
  EXPECT_EQ(owner->Describe(), "job job-000001, request run-1");
  EXPECT_EQ(core::ReadDirOwner(Folder("b", nullptr).string()).status().code(), absl::StatusCode::kNotFound);
  // A FIFO must not block the reader; a link is not followed; a file of another format is refused.
  const fs::path fifo = Folder("c", nullptr);
  ASSERT_EQ(::mkfifo((fifo / core::kDirOwnerFile).c_str(), 0600), 0);
  EXPECT_EQ(core::ReadDirOwner(fifo.string()).status().code(), absl::StatusCode::kDataLoss);
  const fs::path link = Folder("d", nullptr);
  fs::create_symlink(d / core::kDirOwnerFile, link / core::kDirOwnerFile);
  EXPECT_EQ(core::ReadDirOwner(link.string()).status().code(), absl::StatusCode::kDataLoss);
  const fs::path other = Folder("e", nullptr);
  std::ofstream(other / core::kDirOwnerFile) << R"({"job": "job-000001", "request": "run-1"})";
  const absl::Status s = core::ReadDirOwner(other.string()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("e/zerofit-owner.json: field 'format'"), std::string::npos) << s;
}

TEST_F(CheckpointRotationTest, RotationRemovesOnlyThisOwnersOlderCheckpoints) {
  const core::DirOwner theirs{"job-000002", "run-2"};
  Folder("step-00000010", &kOurs);
  Folder("step-00000020", &kOurs);
  Folder("step-00000030", &kOurs);
  Folder("step-00000900", &kOurs);   // a later step: not this run's past
  Folder("step-00000005", &theirs);  // another job's
  Folder("step-00000001", nullptr);  // the user's own
  fs::create_directory_symlink(Folder("elsewhere", &kOurs), fs::path(dir_.path()) / "step-00000002");
  auto removed = RotateCheckpoints(dir_.path(), kOurs, 30, 2);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, std::vector<std::string>{dir_.file("step-00000010")});
  for (const char* kept : {"step-00000020", "step-00000030", "step-00000900", "step-00000005",
                           "step-00000001", "step-00000002", "elsewhere"}) {
    EXPECT_TRUE(fs::exists(fs::path(dir_.path()) / kept / "data")) << kept;
  }
  EXPECT_EQ(RotateCheckpoints(dir_.path(), kOurs, 30, 0).status().code(), absl::StatusCode::kInvalidArgument);
  auto none = RotateCheckpoints(dir_.file("missing"), kOurs, 30, 1);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
}

TEST_F(CheckpointRotationTest, StaleWritesOfThisOwnerAndEmptyOnesAreRemoved) {
  Folder("step-00000040.tmp", &kOurs);
  const core::DirOwner theirs{"job-000002", "run-2"};
  Folder("step-00000050.tmp", &theirs);
  Folder("step-00000060.tmp", nullptr);
  fs::create_directories(fs::path(dir_.path()) / "step-00000070.tmp");
  Folder("step-00000030", &kOurs);  // complete: not a stale write
  auto removed = RemoveStaleCheckpointWrites(dir_.path(), kOurs);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed,
            (std::vector<std::string>{dir_.file("step-00000040.tmp"), dir_.file("step-00000070.tmp")}));
  EXPECT_TRUE(fs::exists(fs::path(dir_.path()) / "step-00000050.tmp" / "data"));
  EXPECT_TRUE(fs::exists(fs::path(dir_.path()) / "step-00000060.tmp" / "data"));
  EXPECT_TRUE(fs::exists(fs::path(dir_.path()) / "step-00000030" / "data"));
}

// checkpoint.overwrite / zerofit run --overwrite-checkpoints: an earlier job's marked folders go (complete
// and temporary), with `latest` once it names nothing; the user's unmarked folders, the new owner's own
// folders and a `latest` naming a folder still there stay; the root is marked as the new owner's.
TEST_F(CheckpointRotationTest, OverwriteRetiresOnlyEarlierJobsMarkedCheckpoints) {
  const core::DirOwner earlier{"job-000002", "run-2"};
  ASSERT_TRUE(core::WriteDirOwner(dir_.path(), earlier).ok());
  Folder("step-00000010", &earlier);
  Folder("step-00000020", &earlier);
  Folder("step-00000025.tmp", &earlier);
  Folder("step-00000030", nullptr);  // the user's, whatever its name
  Folder("step-00000040", &kOurs);
  Folder("notes", nullptr);
  std::ofstream(fs::path(dir_.path()) / "latest") << "step-00000020\n";
  auto removed = RetireOtherJobsCheckpoints(dir_.path(), kOurs);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, (std::vector<std::string>{dir_.file("step-00000010"), dir_.file("step-00000020"),
                                                dir_.file("step-00000025.tmp")}));
  EXPECT_FALSE(fs::exists(dir_.file("latest")));
  EXPECT_TRUE(fs::exists(fs::path(dir_.path()) / "step-00000030" / "data"));
  EXPECT_TRUE(fs::exists(fs::path(dir_.path()) / "step-00000040" / "data"));
  EXPECT_TRUE(fs::exists(fs::path(dir_.path()) / "notes" / "data"));
  auto root = core::ReadDirOwner(dir_.path());
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(*root, kOurs);
  // Again: nothing of another job is left, and a `latest` naming a folder that exists stays.
  std::ofstream(fs::path(dir_.path()) / "latest") << "step-00000040\n";
  removed = RetireOtherJobsCheckpoints(dir_.path(), kOurs);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_TRUE(removed->empty());
  EXPECT_TRUE(fs::exists(dir_.file("latest")));
}

TEST_F(CheckpointRotationTest, OverwriteRefusesADirectoryZerofitDidNotCreateAndRemovesNothing) {
  const core::DirOwner earlier{"job-000002", "run-2"};
  Folder("step-00000010", &earlier);  // marked, but the root is not: not zerofit's directory
  const absl::Status s = RetireOtherJobsCheckpoints(dir_.path(), kOurs).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("zerofit did not create it (no zerofit-owner.json)"), std::string::npos) << s;
  EXPECT_TRUE(fs::exists(fs::path(dir_.path()) / "step-00000010" / "data"));
  // Missing and empty directories hold nothing to retire.
  EXPECT_TRUE(RetireOtherJobsCheckpoints(dir_.file("absent"), kOurs).ok());
  fs::create_directories(dir_.file("empty"));
  EXPECT_TRUE(RetireOtherJobsCheckpoints(dir_.file("empty"), kOurs).ok());
}

// checkpoint.resume / zerofit run --resume: the folders of the job whose checkpoint `latest` names become
// the new owner's (so that its rotation removes them in turn), and so does the root; another job's folders,
// the user's and the new owner's own stay as they are. Then its rotation keeps only the newest.
TEST_F(CheckpointRotationTest, ResumeAdoptsTheLatestCheckpointsOwnersFolders) {
  const core::DirOwner earlier{"job-000002", "run-2"}, other{"job-000009", "run-9"};
  ASSERT_TRUE(core::WriteDirOwner(dir_.path(), earlier).ok());
  Folder("step-00000010", &earlier);
  Folder("step-00000020", &earlier);
  Folder("step-00000025.tmp", &earlier);
  Folder("step-00000005", &other);
  Folder("step-00000015", nullptr);  // the user's
  std::ofstream(fs::path(dir_.path()) / "latest") << "step-00000020\n";
  auto adopted = AdoptCheckpoints(dir_.path(), kOurs);
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_EQ(*adopted, (std::vector<std::string>{dir_.file("step-00000010"), dir_.file("step-00000020"),
                                                dir_.file("step-00000025.tmp")}));
  for (const char* name : {"step-00000010", "step-00000020", "step-00000025.tmp"}) {
    auto marked = core::ReadDirOwner(dir_.file(name));
    ASSERT_TRUE(marked.ok()) << marked.status();
    EXPECT_EQ(*marked, kOurs) << name;
    EXPECT_TRUE(fs::exists(fs::path(dir_.path()) / name / "data")) << name;
  }
  EXPECT_EQ(*core::ReadDirOwner(dir_.file("step-00000005")), other);
  EXPECT_FALSE(core::ReadDirOwner(dir_.file("step-00000015")).ok());
  EXPECT_EQ(*core::ReadDirOwner(dir_.path()), kOurs);
  EXPECT_TRUE(fs::exists(dir_.file("latest")));
  // Adopted again (a restarted attempt): nothing more to take over.
  adopted = AdoptCheckpoints(dir_.path(), kOurs);
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_TRUE(adopted->empty());
  // The new owner's next checkpoint rotates the adopted ones away, and never the others.
  Folder("step-00000030", &kOurs);
  auto removed = RotateCheckpoints(dir_.path(), kOurs, 30, 1);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, (std::vector<std::string>{dir_.file("step-00000010"), dir_.file("step-00000020")}));
  EXPECT_TRUE(fs::exists(dir_.file("step-00000005")));
  EXPECT_TRUE(fs::exists(dir_.file("step-00000015")));
}

TEST_F(CheckpointRotationTest, ResumeRefusesADirectoryZerofitDidNotCreateAndChangesNothing) {
  const core::DirOwner earlier{"job-000002", "run-2"};
  Folder("step-00000010", &earlier);
  std::ofstream(fs::path(dir_.path()) / "latest") << "step-00000010\n";
  const absl::Status s = AdoptCheckpoints(dir_.path(), kOurs).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("zerofit did not create it (no zerofit-owner.json)"), std::string::npos) << s;
  EXPECT_EQ(*core::ReadDirOwner(dir_.file("step-00000010")), earlier);
  EXPECT_TRUE(AdoptCheckpoints(dir_.file("absent"), kOurs).ok());
  fs::create_directories(dir_.file("empty"));
  EXPECT_TRUE(AdoptCheckpoints(dir_.file("empty"), kOurs).ok());
}

}  // namespace
}  // namespace zerofit::sharding
