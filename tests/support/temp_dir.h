// A fresh directory under the system temp dir (mkdtemp), removed with everything in it on destruction.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

#include "gtest/gtest.h"

namespace zerofit::test_support {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "zerofit_test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "_XXXXXX")).string();
    const char* made = ::mkdtemp(tmpl.data());
    EXPECT_NE(made, nullptr) << tmpl;
    path_ = made != nullptr ? tmpl : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return (std::filesystem::path(path_) / name).string(); }

 private:
  std::string path_;
};

}  // namespace zerofit::test_support
