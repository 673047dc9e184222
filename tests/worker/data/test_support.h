// Test helpers for zerofit_data: a character-level fake Tokenizer and a self-deleting temporary directory.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "worker/data/tokenizer.h"

namespace zerofit::data::testing {

// One id per printable ASCII character: id = kFirstChar + (c - ' '). Ids 0..3 are pad, unk, bos, eos
// (pad configurable: -1 makes pad_id() fall back to eos, like a model without a pad piece).
class FakeTokenizer final : public Tokenizer {
 public:
  static constexpr int32_t kFirstChar = 4;
  explicit FakeTokenizer(int32_t pad = 0) : pad_(pad) {}

  absl::StatusOr<std::vector<int32_t>> Encode(const std::string& text) const override {
    std::vector<int32_t> ids;
    for (char c : text) {
      if (c < ' ' || c > '~')
        return absl::InvalidArgumentError(absl::StrCat("fake tokenizer: byte ", int(c)));
      ids.push_back(kFirstChar + (c - ' '));
    }
    return ids;
  }
  absl::StatusOr<std::string> Decode(const std::vector<int32_t>& ids) const override {
    std::string s;
    for (int32_t id : ids) {
      if (id < 0 || id >= vocab_size()) return absl::InvalidArgumentError("fake tokenizer: id out of range");
      if (id >= kFirstChar) s.push_back(static_cast<char>(' ' + id - kFirstChar));
    }
    return s;
  }
  int32_t bos_id() const override { return 2; }
  int32_t eos_id() const override { return 3; }
  int32_t pad_id() const override { return pad_ >= 0 ? pad_ : eos_id(); }
  int32_t vocab_size() const override { return kFirstChar + 95; }

  // The id of character c.
  static int32_t Id(char c) { return kFirstChar + (c - ' '); }

 private:
  int32_t pad_;
};

// A fresh directory under the test temp dir, named after the running test, the process and `tag` (give
// distinct tags to several directories in one test); removed (recursively) on destruction.
class ScopedTempDir {
 public:
  explicit ScopedTempDir(const std::string& tag = "") {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::path(::testing::TempDir()) /
            absl::StrCat("zerofit_data_", ::getpid(), "_", info != nullptr ? info->test_suite_name() : "",
                         "_", info != nullptr ? info->name() : "", tag);
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScopedTempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string File(const std::string& name) const { return (path_ / name).string(); }
  // Writes `contents` to `name` in the directory and returns its path.
  std::string Write(const std::string& name, const std::string& contents) const {
    std::ofstream out(File(name), std::ios::binary);
    out << contents;
    return File(name);
  }

 private:
  std::filesystem::path path_;
};

}  // namespace zerofit::data::testing
