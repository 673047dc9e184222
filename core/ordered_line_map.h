// OrderedLineMap: the lines of a stream mapped through a function on all threads of a ThreadPool, with the
// results handed to a consumer on the calling thread in input order. Used to tokenize JSONL files on all
// cores while keeping the output, and the first error, exactly those of a serial loop.
//
// Memory is bounded: lines are read in chunks (LineChunking), and a chunk is mapped and consumed before the
// next is read, so at most one chunk of lines and their results is alive at a time.
//
// Error contract (the serial loop's): for each line in order, a failed map result or a failed consume
// stops the run with that status; lines before it have been consumed, lines after it never are (they may
// have been mapped: map must have no side effects that matter).
#pragma once

#include <cstddef>
#include <istream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/line_reader.h"
#include "core/thread_pool.h"

namespace zerofit::core {

struct InputLine {
  std::string text;           // without the newline
  size_t number = 0;          // 1-based
  bool unterminated = false;  // the stream ended right after this line without a newline (last line only)
};

// A chunk ends after max_lines lines or once it holds max_bytes bytes of text, whichever comes first
// (a single longer line is still read whole, up to max_line_bytes: a longer one is an error).
struct LineChunking {
  size_t max_lines = 4096;
  size_t max_bytes = size_t{8} << 20;
  size_t max_line_bytes = kMaxLineBytes;
  std::string source = "input";  // names the stream in errors
};

// Reads the next chunk of `in` into `lines` (cleared first); `last_number` is the number of the line read
// before. Returns false when no line was left. An overlong line ends the chunk before it and sets `*stop`
// (OutOfRange at "SOURCE:LINE"), so that the lines before it are still mapped and consumed first.
inline bool ReadLineChunk(std::istream& in, const LineChunking& chunking, size_t last_number,
                          std::vector<InputLine>* lines, absl::Status* stop) {
  lines->clear();
  size_t bytes = 0;
  InputLine line;
  while (lines->size() < chunking.max_lines && bytes < chunking.max_bytes) {
    const absl::StatusOr<bool> read = ReadLine(in, &line.text, chunking.max_line_bytes);
    if (!read.ok()) {
      *stop = absl::OutOfRangeError(
          absl::StrCat(chunking.source, ":", last_number + 1, ": ", read.status().message()));
      break;
    }
    if (!*read) break;
    line.number = ++last_number;
    line.unterminated = in.eof();
    bytes += line.text.size();
    lines->push_back(std::move(line));
    line = InputLine();
  }
  return !lines->empty();
}

// Runs map(const InputLine&) -> absl::StatusOr<T> for every line of `in` on `pool` (concurrently: map must
// be safe to call from several threads), then consume(T&&, const InputLine&) -> absl::Status on the
// calling thread in line order. Returns the number of lines read, or the first error in line order (see
// above). The caller checks in.bad() afterwards: a read error ends the lines like the end of the stream.
template <typename T, typename MapFn, typename ConsumeFn>
absl::StatusOr<size_t> OrderedLineMap(std::istream& in, ThreadPool& pool, const LineChunking& chunking,
                                      MapFn&& map, ConsumeFn&& consume) {
  std::vector<InputLine> lines;
  std::vector<absl::StatusOr<T>> results;
  size_t last_number = 0;
  absl::Status stop;
  for (;;) {
    if (!ReadLineChunk(in, chunking, last_number, &lines, &stop)) break;
    last_number = lines.back().number;
    results.clear();
    results.resize(lines.size());
    pool.ParallelFor(lines.size(), [&](size_t i) { results[i] = map(lines[i]); });
    for (size_t i = 0; i < lines.size(); ++i) {
      if (!results[i].ok()) return results[i].status();
      if (absl::Status s = consume(*std::move(results[i]), lines[i]); !s.ok()) return s;
    }
    if (!stop.ok()) break;
  }
  if (!stop.ok()) return stop;
  return last_number;
}

// The parallelism a `threads` setting asks for: itself when positive, else every core the system reports
// (at least 1).
inline int ResolveThreadCount(int threads) {
  if (threads > 0) return threads;
  const unsigned cores = std::thread::hardware_concurrency();  // 0 when unknown
  return cores > 0 ? static_cast<int>(cores) : 1;
}

}  // namespace zerofit::core
