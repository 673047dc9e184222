// Files a client names (a model's config.json or weights, read by the coordinator to size a job) are read
// only when they are regular files within a size limit: a FIFO used to block the reading thread in open(2)
// forever, a device to be read without end.
#include "core/regular_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <future>
#include <string>

#include "core/hf_config.h"
#include "core/safetensors.h"
#include "tests/support/temp_dir.h"

namespace zerofit::core {
namespace {

using zerofit::test_support::TempDir;

// `read()`'s status, or a failure if it is still blocked after 10 s (then the FIFO gets a writer, so that
// the blocked thread returns and the test ends).
absl::Status WithinTenSeconds(const std::string& fifo, const std::function<absl::Status()>& read) {
  auto done = std::async(std::launch::async, read);
  if (done.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    const int writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (writer >= 0) ::close(writer);
    ADD_FAILURE() << "still blocked on " << fifo << " after 10 s";
  }
  return done.get();
}

TEST(RegularFileTest, ReadsRegularFilesAndRefusesEverythingElseAtOnce) {
  TempDir dir("regular_file");
  std::ofstream(dir.file("small.json")) << "{\"a\": 1}";
  auto text = ReadRegularFile(dir.file("small.json"), 8);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "{\"a\": 1}");
  auto big = ReadRegularFile(dir.file("small.json"), 7);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("small.json: 8 bytes, more than the limit of 7 bytes"),
            std::string::npos)
      << big.status();
  EXPECT_EQ(ReadRegularFile(dir.file("missing"), 8).status().code(), absl::StatusCode::kNotFound);
  auto device = ReadRegularFile("/dev/zero", 1 << 20);
  ASSERT_FALSE(device.ok());
  EXPECT_NE(device.status().message().find("/dev/zero: not a regular file (a character device)"),
            std::string::npos)
      << device.status();
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const absl::Status s = WithinTenSeconds(fifo, [&] { return ReadRegularFile(fifo, 1 << 20).status(); });
  EXPECT_NE(s.message().find("not a regular file (a FIFO)"), std::string::npos) << s;
}

TEST(RegularFileTest, AModelWhoseConfigOrWeightsAreAFifoIsRefusedAtOnce) {
  TempDir dir("regular_file");
  const std::string fifo = dir.file("config.json");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  absl::Status s = WithinTenSeconds(fifo, [&] { return LoadHfConfig(dir.path()).status(); });
  EXPECT_NE(s.message().find("config.json: not a regular file (a FIFO)"), std::string::npos) << s;
  s = WithinTenSeconds(fifo, [&] { return SafetensorsFile::Open(fifo).status(); });
  EXPECT_NE(s.message().find("not a regular file"), std::string::npos) << s;
}

}  // namespace
}  // namespace zerofit::core
