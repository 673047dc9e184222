// The state directory and its files are private: created 0700 / 0600 whatever the umask; a directory or
// token file others could write (or read, for the token) is refused, naming the path and the chmod.
#include "cli/private_files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace zerofit::cli {
namespace {

namespace fs = std::filesystem;

int ModeOf(const fs::path& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 0777) : -1;
}

class PrivateFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    old_umask_ = ::umask(022);
    root_ = fs::temp_directory_path() / ("zerofit_private_" + std::to_string(::getpid()));
    fs::remove_all(root_);
  }
  void TearDown() override {
    fs::remove_all(root_);
    ::umask(old_umask_);
  }
  fs::path root_;
  mode_t old_umask_ = 022;
};

TEST_F(PrivateFilesTest, MakesTheDirectory0700AndFiles0600) {
  const fs::path dir = root_ / "a" / "state";
  ASSERT_TRUE(MakePrivateDir(dir.string()).ok());
  EXPECT_EQ(ModeOf(dir), 0700);
  EXPECT_TRUE(MakePrivateDir(dir.string()).ok()) << "an existing private directory is fine";
  std::ofstream(dir / "address") << "old\n";
  fs::permissions(dir / "address", fs::perms(0644));
  ASSERT_TRUE(WritePrivateFileAtomic((dir / "address").string(), "127.0.0.1:1\n").ok());
  EXPECT_EQ(ModeOf(dir / "address"), 0600);
  std::ifstream in(dir / "address");
  std::string text;
  in >> text;
  EXPECT_EQ(text, "127.0.0.1:1");
  ASSERT_TRUE(WritePrivateFileAtomic((dir / "sbatch.sh").string(), "#!/bin/bash\n", 0700).ok());
  EXPECT_EQ(ModeOf(dir / "sbatch.sh"), 0700);
}

TEST_F(PrivateFilesTest, RefusesADirectoryOthersCanWrite) {
  for (int mode : {0777, 0770, 0702}) {
    const fs::path dir = root_ / ("open" + std::to_string(mode));
    fs::create_directories(dir);
    ASSERT_EQ(::chmod(dir.c_str(), mode), 0);
    for (const absl::Status& s : {MakePrivateDir(dir.string()), CheckPrivateDir(dir.string())}) {
      EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
      EXPECT_NE(s.message().find(dir.string()), std::string::npos) << s;
      EXPECT_NE(s.message().find("chmod 700 " + dir.string()), std::string::npos) << s;
    }
  }
  const fs::path readable = root_ / "readable";
  fs::create_directories(readable);
  ASSERT_EQ(::chmod(readable.c_str(), 0755), 0);
  EXPECT_TRUE(CheckPrivateDir(readable.string()).ok()) << "its files are 0600: reading the names is harmless";
}

TEST_F(PrivateFilesTest, RefusesATokenFileOthersCanReadOrWrite) {
  ASSERT_TRUE(MakePrivateDir(root_.string()).ok());
  const fs::path token = root_ / "token";
  std::ofstream(token) << "0123456789abcdef0123456789abcdef\n";
  for (int mode : {0644, 0640, 0620, 0604, 0602}) {
    ASSERT_EQ(::chmod(token.c_str(), mode), 0);
    const absl::Status s = CheckTokenFile(token.string());
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << std::oct << mode;
    EXPECT_NE(s.message().find("chmod 600 " + token.string()), std::string::npos) << s;
    EXPECT_NE(s.message().find((mode & 022) != 0 ? "writable" : "readable"), std::string::npos) << s;
  }
  ASSERT_EQ(::chmod(token.c_str(), 0600), 0);
  EXPECT_TRUE(CheckTokenFile(token.string()).ok());
  ASSERT_EQ(::chmod(token.c_str(), 0400), 0);
  EXPECT_TRUE(CheckTokenFile(token.string()).ok());
}

}  // namespace
}  // namespace zerofit::cli
