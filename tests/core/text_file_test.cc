// Whole-file text I/O (core/text_file.h): a failed atomic write removes what it wrote.
#include "core/text_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace zerofit::core {
namespace {

namespace fs = std::filesystem;

TEST(TextFileTest, AnAtomicWriteThatCannotRenameLeavesNoTemporaryFile) {
  const fs::path dir = fs::temp_directory_path() / ("zerofit_text_file_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "target" / "inside");  // a non-empty directory: rename(2) onto it fails
  const absl::Status s = WriteTextFileAtomic((dir / "target").string(), "text");
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(fs::exists(dir / "target.tmp")) << "the failed write left its temporary file";
  EXPECT_TRUE(fs::exists(dir / "target" / "inside"));
  ASSERT_TRUE(WriteTextFileAtomic((dir / "file").string(), "text").ok());
  EXPECT_EQ(*ReadTextFile((dir / "file").string()), "text");
  EXPECT_FALSE(fs::exists(dir / "file.tmp"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace zerofit::core
