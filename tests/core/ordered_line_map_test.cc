// OrderedLineMap: results reach the consumer in line order and the first error in line order wins, for any
// thread count and chunk size.
#include "core/ordered_line_map.h"

#include <fstream>
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
MapRun MapAll(const std::string& input, int threads, size_t max_lines,
              size_t max_line_bytes = kMaxLineBytes) {
  std::istringstream in(input);
  ThreadPool pool(threads);
  MapRun run;
  run.lines = OrderedLineMap<std::string>(
      in, pool, LineChunking{max_lines, size_t{1} << 20, max_line_bytes, "in.jsonl"},
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

// A line past the bound (a JSON array on one line, /dev/zero) ends the run at its number, after the lines
// before it were consumed, unless an earlier line's error comes first.
TEST(OrderedLineMapTest, AnOverlongLineStopsTheRunAtItsLineAfterTheLinesBeforeIt) {
  std::string input = Lines(10, 0, "");
  input.replace(input.find("l7\n"), 2, std::string(100, 'x'));
  for (size_t chunk : {3, 4096}) {
    const MapRun r = MapAll(input, 2, chunk, /*max_line_bytes=*/64);
    EXPECT_EQ(r.lines.status().code(), absl::StatusCode::kOutOfRange);
    EXPECT_EQ(r.lines.status().message(),
              "in.jsonl:7: longer than 64 bytes: a JSONL file holds one JSON object per line (is this a JSON "
              "array, or a binary or compressed file?)");
    EXPECT_EQ(r.consumed.size(), 6u) << chunk;
  }
  input.replace(input.find("l3\n"), 2, "bad");
  EXPECT_EQ(MapAll(input, 2, 4096, 64).lines.status().message(), "bad at 3");
  const MapRun exact = MapAll(std::string(64, 'y') + "\n", 1, 16, 64);
  ASSERT_TRUE(exact.lines.ok()) << exact.lines.status();
  EXPECT_EQ(exact.consumed.size(), 1u);
}

// ReadLine reads as std::getline does, stream state included.
TEST(OrderedLineMapTest, ReadLineMatchesGetline) {
  // Lines around ReadLine's 16 KiB piece too.
  const std::string piece(16383, 'p');
  for (const std::string& text :
       {std::string(""), std::string("a"), std::string("a\n"), std::string("a\n\nb"),
        std::string("a\r\nb\n\n"), std::string("\n\n"), std::string(20000, 'a') + "\nb", piece + "\n" + piece,
        piece + piece + "\n", piece + "q\n\n"}) {
    std::istringstream ours(text), theirs(text);
    std::string a, b;
    for (int i = 0; i < 6; ++i) {
      const absl::StatusOr<bool> read = ReadLine(ours, &a);
      ASSERT_TRUE(read.ok());
      const bool got = static_cast<bool>(std::getline(theirs, b));
      EXPECT_EQ(*read, got) << "'" << text << "' read " << i;
      if (got) {
        EXPECT_EQ(a, b);
      }
      EXPECT_EQ(ours.eof(), theirs.eof()) << "'" << text << "' read " << i;
      EXPECT_EQ(ours.fail(), theirs.fail()) << "'" << text << "' read " << i;
    }
  }
}

// OpenLineInput: a directory is named as one (it opens, then fails its first read), a missing file with the
// system's reason; a FIFO-like stream such as /dev/null opens.
TEST(OrderedLineMapTest, OpenLineInputRefusesADirectoryByName) {
  const std::string dir = ::testing::TempDir();
  std::ifstream in;
  const absl::Status d = OpenLineInput(dir, &in);
  EXPECT_EQ(d.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(d.message(), dir + ": a directory, not a JSONL file");
  std::ifstream missing;
  const absl::Status m = OpenLineInput(dir + "/no-such.jsonl", &missing);
  EXPECT_EQ(m.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(m.message(), dir + "/no-such.jsonl: cannot open: No such file or directory");
  std::ifstream null;
  ASSERT_TRUE(OpenLineInput("/dev/null", &null).ok());
  std::string line;
  EXPECT_FALSE(*ReadLine(null, &line));
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
