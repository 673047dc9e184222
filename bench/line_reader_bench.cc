// core::ReadLine (the bounded line reader of every JSONL input) against std::getline on the same file, side
// by side, medians of --reps runs each: the bound must not cost the reading speed.
//   line_reader_bench [--lines N] [--reps R]   (writes a temporary JSONL file of N short lines)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/line_reader.h"

namespace {

double ReadAll(const std::string& path, bool bounded, size_t* lines) {
  std::ifstream in(path, std::ios::binary);
  std::string line;
  size_t n = 0, bytes = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const auto next = [&] {
    return bounded ? zerofit::core::ReadLine(in, &line).value_or(false)
                   : static_cast<bool>(std::getline(in, line));
  };
  while (next()) {
    ++n;
    bytes += line.size();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  *lines = n;
  return static_cast<double>(bytes) / s / 1e6;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  size_t lines = 1000000;
  int reps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--lines") lines = std::strtoull(argv[i + 1], nullptr, 10);
    if (flag == "--reps") reps = std::max(1, std::atoi(argv[i + 1]));
  }
  const std::string path = (std::filesystem::temp_directory_path() / "line_reader_bench.jsonl").string();
  {
    std::ofstream out(path, std::ios::binary);
    std::mt19937 rng(7);
    for (size_t i = 0; i < lines; ++i) {
      out << "{\"text\":\"" << std::string(10 * (1 + rng() % 20), 'a') << "\"}\n";
    }
  }
  std::vector<double> getline_mbs, readline_mbs;
  size_t n_getline = 0, n_readline = 0;
  for (int r = 0; r < reps; ++r) {  // interleaved, so that both see the same machine
    getline_mbs.push_back(ReadAll(path, false, &n_getline));
    readline_mbs.push_back(ReadAll(path, true, &n_readline));
  }
  std::filesystem::remove(path);
  const double g = Median(getline_mbs), b = Median(readline_mbs);
  std::printf("std::getline %.0f MB/s, core::ReadLine %.0f MB/s (%.2fx), %zu lines, median of %d\n", g, b,
              b / g, n_readline, reps);
  if (n_getline != n_readline || n_readline != lines) {
    std::printf("FAIL: line counts differ (%zu, %zu, %zu written)\n", n_getline, n_readline, lines);
    return 1;
  }
  std::printf("PASS\n");
  return 0;
}
