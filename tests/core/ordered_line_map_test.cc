// OrderedLineMap: results reach the consumer in line order and the first error in line order wins, for any
// thread count and chunk size.
#include "core/ordered_line_map.h"

#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace zerofit::core {
namespace {

struct MapRun {
  absl::StatusOr<size_t> lines;
  std::vector<std::string> consumed;
};

// Maps each line to "<number>:<text>"; a line "bad" fails in map, a line "stop" fails in consume.
MapRun MapAll(const std::string& input, int threads, size_t max_lines) {
  std::istringstream in(input);
  ThreadPool pool(threads);
  MapRun run;
  run.lines = OrderedLineMap<std::string>(
      in, pool, LineChunking{max_lines, size_t{1} << 20},
      [](const InputLine& line) -> absl::StatusOr<std::string> {
        if (line.text == "bad") return absl::InvalidArgumentError(absl::StrCat("bad at ", line.number));
        return absl::StrCat(line.number, ":", line.text, line.unterminated ? "$" : "");
      },
      [&](std::string s, const InputLine& line) {
        if (line.text == "stop") return absl::DataLossError(absl::StrCat("stop at ", line.number));
        run.consumed.push_back(std::move(s));
        return absl::OkStatus();
      });
  return run;
}

std::string Lines(int n, int bad_at, const char* bad) {
  std::string s;
  for (int i = 1; i <= n; ++i) absl::StrAppend(&s, i == bad_at ? bad : absl::StrCat("l", i), "\n");
  return s;
}

TEST(OrderedLineMapTest, SameResultsForEveryThreadCountAndChunkSize) {
  const std::string input = Lines(1000, 0, "") + "tail";  // last line without newline
  const MapRun serial = MapAll(input, 1, 4096);
  ASSERT_TRUE(serial.lines.ok());
  EXPECT_EQ(*serial.lines, 1001u);
  ASSERT_EQ(serial.consumed.size(), 1001u);
  EXPECT_EQ(serial.consumed.front(), "1:l1");
  EXPECT_EQ(serial.consumed.back(), "1001:tail$");
  for (int threads : {2, 3, 8}) {
    for (size_t chunk : {1, 7, 64, 4096}) {
      const MapRun r = MapAll(input, threads, chunk);
      ASSERT_TRUE(r.lines.ok());
      EXPECT_EQ(*r.lines, 1001u);
      EXPECT_EQ(r.consumed, serial.consumed) << threads << " threads, chunks of " << chunk;
    }
  }
}

TEST(OrderedLineMapTest, FirstErrorInLineOrderWins) {
  // A map error at 700 and a consume error at 900: 700 wins; lines 1..699 consumed, none after.
  std::string input = Lines(1000, 700, "bad");
  input.replace(input.find("l900\n"), 4, "stop");
  input.replace(input.find("l950\n"), 4, "bad");
  for (int threads : {1, 4}) {
    for (size_t chunk : {3, 100, 4096}) {
      const MapRun r = MapAll(input, threads, chunk);
      EXPECT_EQ(r.lines.status().message(), "bad at 700");
      EXPECT_EQ(r.consumed.size(), 699u);
    }
  }
  input.replace(input.find("bad\n"), 3, "l700");
  const MapRun r = MapAll(input, 4, 64);
  EXPECT_EQ(r.lines.status().message(), "stop at 900");
  EXPECT_EQ(r.consumed.size(), 899u);
}

TEST(OrderedLineMapTest, EmptyStreamHasNoLines) {
  const MapRun r = MapAll("", 3, 16);
  ASSERT_TRUE(r.lines.ok());
  EXPECT_EQ(*r.lines, 0u);
  EXPECT_TRUE(r.consumed.empty());
}

TEST(OrderedLineMapTest, ResolveThreadCount) {
  EXPECT_EQ(ResolveThreadCount(3), 3);
  EXPECT_GE(ResolveThreadCount(0), 1);
}

}  // namespace
}  // namespace zerofit::core
