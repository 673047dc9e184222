#include "sharding/checkpoint_owner.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "sharding/checkpoint.h"

namespace zerofit::sharding {
namespace {

namespace fs = std::filesystem;

class CheckpointOwnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("zerofit_owner_" + std::to_string(getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A checkpoint directory as SaveCheckpoint leaves it (the manifest fields the owner check reads).
  void WriteCheckpoint(int64_t step, const std::string& extra) {
    const fs::path d = dir_ / ("step-0000" + std::to_string(step));
    fs::create_directories(d);
    std::ofstream(d / "manifest.json") << R"({"format": "zerofit-zero2-checkpoint", "version": 1, "step": )"
                                       << step << R"(, "world_size": 2, "extra": )" << extra << "}";
    std::ofstream(dir_ / "latest") << d.filename().string() << "\n";
  }

  fs::path dir_;
};

TEST_F(CheckpointOwnerTest, ExtraNamesJobRequestAndStep) {
  EXPECT_EQ(CheckpointOwnerExtra("job-000002", "run-7-\"q\"", 40),
            R"({"job":"job-000002","request":"run-7-\"q\"","step":40})");
}

TEST_F(CheckpointOwnerTest, AnEmptyOrMissingDirectoryAndOurOwnCheckpointAreFine) {
  EXPECT_TRUE(CheckCheckpointDirIsOurs(dir_.string(), "run-1").ok());  // does not exist yet
  fs::create_directories(dir_);
  EXPECT_TRUE(CheckCheckpointDirIsOurs(dir_.string(), "run-1").ok());
  WriteCheckpoint(40, CheckpointOwnerExtra("job-000001", "run-1", 40));
  EXPECT_TRUE(CheckCheckpointDirIsOurs(dir_.string(), "run-1").ok());
}

TEST_F(CheckpointOwnerTest, AnotherJobsCheckpointIsRefusedWithWhoseAndWhatToDo) {
  WriteCheckpoint(40, CheckpointOwnerExtra("job-000001", "run-1", 40));
  absl::Status s = CheckCheckpointDirIsOurs(dir_.string(), "run-2");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find(absl::StrCat("checkpoint.dir ", dir_.string(),
                                          " already holds another job's checkpoint (step 40, job job-000001, "
                                          "request run-1); a new job would replace it")),
            std::string::npos)
      << s;
  // A checkpoint without an owner (written before owners were recorded) is not ours either.
  WriteCheckpoint(60, R"({"job": "job-000001", "step": 60})");
  s = CheckCheckpointDirIsOurs(dir_.string(), "run-1");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("(step 60, job job-000001)"), std::string::npos) << s;
  // Something that is not a checkpoint at all.
  std::ofstream(dir_ / "step-000060" / "manifest.json") << "{ truncated";
  s = CheckCheckpointDirIsOurs(dir_.string(), "run-1");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("holds something that is not a readable checkpoint"), std::string::npos) << s;
}

// Manifests that are JSON but not ours: each was a crash (nlohmann's value() throws on a type mismatch)
// or a silently wrapped number before.
TEST_F(CheckpointOwnerTest, MalformedManifestsAreErrorsNamingTheField) {
  const std::string head = R"({"format": "zerofit-zero2-checkpoint", "version": 1, )";
  const std::pair<std::string, std::string> cases[] = {
      {R"({"format": 1, "version": 1, "step": 1, "world_size": 2})", "field 'format' is not"},
      {R"({"format": "zerofit-zero2-checkpoint", "version": "1", "step": 1, "world_size": 2})",
       "field 'version' is not 1"},
      {head + R"("step": 1, "world_size": 4294967298})", "field 'world_size' is 4294967298, not 1..1048576"},
      {head + R"("step": 1, "world_size": 0})", "field 'world_size' is 0"},
      {head + R"("step": -5, "world_size": 2})", "field 'step' is -5"},
      {head + R"("step": 18446744073709551615, "world_size": 2})", "field 'step' is 18446744073709551615"},
      {head + R"("step": 1, "world_size": 2, "extra": )" + std::string(10000, '[') + std::string(10000, ']') +
           "}",
       "manifest.json:1: JSON nested deeper than 64 levels"},
  };
  for (const auto& [manifest, expected] : cases) {
    fs::create_directories(dir_ / "step-1");
    std::ofstream(dir_ / "step-1" / "manifest.json", std::ios::trunc) << manifest;
    std::ofstream(dir_ / "latest", std::ios::trunc) << "step-1\n";
    absl::StatusOr<CheckpointInfo> info = absl::UnknownError("not run");
    EXPECT_NO_THROW(info = ReadLatestCheckpoint(dir_.string())) << manifest.substr(0, 120);
    ASSERT_FALSE(info.ok()) << manifest.substr(0, 120);
    EXPECT_NE(info.status().message().find(expected), std::string::npos)
        << info.status().ToString().substr(0, 300);
  }
}

}  // namespace
}  // namespace zerofit::sharding
