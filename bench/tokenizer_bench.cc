// zerofit_tokenizer_bench: encode throughput of zerofit::text::TokenizerJson, single-threaded (MB/s per
// thread) and on all cores via EncodeBatch. The text is split into documents at line boundaries
// (~--doc-bytes each); every document is encoded with add_special_tokens=false, exactly as
// bench/tokenizer_bench.mjs does with the Rust library, so the two figures compare directly.
//
//   zerofit_tokenizer_bench --hf-dir DIR --text FILE [--names a,b] [--reps 5] [--threads N] [--doc-bytes
//   4096]
// Prints one line per tokenizer: name, MB (input bytes / 1e6), tokens, median MB/s over reps (1 thread),
// and the EncodeBatch MB/s when --threads > 1.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_split.h"
#include "core/text_file.h"
#include "core/thread_pool.h"
#include "text/hf/batch_encode.h"
#include "text/hf/tokenizer_json.h"

namespace {

struct Options {
  std::string hf_dir;
  std::string text_path;
  std::vector<std::string> names = {"qwen2.5", "mistral-v0.3", "tinyllama", "gpt2", "smollm2"};
  int reps = 5;
  int threads = 1;
  size_t doc_bytes = 4096;
  std::string dump_dir;  // when set: <dir>/<name>.ids gets one line of ids per document
};

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--hf-dir") {
      o->hf_dir = value;
    } else if (flag == "--text") {
      o->text_path = value;
    } else if (flag == "--names") {
      o->names = absl::StrSplit(value, ',');
    } else if (flag == "--reps") {
      o->reps = std::max(1, std::atoi(value.c_str()));
    } else if (flag == "--threads") {
      o->threads = std::max(1, std::atoi(value.c_str()));
    } else if (flag == "--dump-ids") {
      o->dump_dir = value;
    } else if (flag == "--doc-bytes") {
      o->doc_bytes = std::max(1, std::atoi(value.c_str()));
    } else {
      return false;
    }
  }
  return !o->hf_dir.empty() && !o->text_path.empty() && argc % 2 == 1;
}

// Documents of about `doc_bytes`, cut after a newline; views into `text`.
std::vector<std::string_view> SplitDocuments(std::string_view text, size_t doc_bytes) {
  std::vector<std::string_view> docs;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = std::min(text.size(), begin + doc_bytes);
    const size_t newline = text.find('\n', end);
    end = newline == std::string_view::npos ? text.size() : newline + 1;
    docs.push_back(text.substr(begin, end - begin));
    begin = end;
  }
  return docs;
}

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Writes the ids of every document, one line each, for comparison with tokenizer_bench.mjs's dump.
bool DumpIds(const zerofit::text::TokenizerJson& tokenizer, const std::vector<std::string_view>& docs,
             const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return false;
  for (std::string_view doc : docs) {
    auto ids = tokenizer.Encode(doc, false);
    if (!ids.ok()) {
      std::fclose(f);
      return false;
    }
    for (size_t i = 0; i < ids->size(); ++i) std::fprintf(f, i ? " %d" : "%d", (*ids)[i]);
    std::fputc('\n', f);
  }
  return std::fclose(f) == 0;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int RunOne(const Options& o, const std::string& name, const std::vector<std::string_view>& docs, double mb) {
  auto tokenizer = zerofit::text::TokenizerJson::FromFile(o.hf_dir + "/" + name + "/tokenizer.json");
  if (!tokenizer.ok()) {
    std::cerr << tokenizer.status() << "\n";
    return 1;
  }
  if (!o.dump_dir.empty() && !DumpIds(**tokenizer, docs, o.dump_dir + "/" + name + ".ids")) {
    std::cerr << "cannot write ids to " << o.dump_dir << "\n";
    return 1;
  }
  std::vector<double> rates;
  size_t tokens = 0;
  for (int r = 0; r < o.reps; ++r) {
    tokens = 0;
    const auto start = std::chrono::steady_clock::now();
    for (std::string_view doc : docs) tokens += (*tokenizer)->Encode(doc, false)->size();
    rates.push_back(mb / Seconds(start));
  }
  std::printf("%-14s %7.2f MB %9zu tokens  1 thread: %7.2f MB/s", name.c_str(), mb, tokens, Median(rates));
  if (o.threads > 1) {
    zerofit::core::ThreadPool pool(o.threads);
    std::vector<double> batch_rates;
    for (int r = 0; r < o.reps; ++r) {
      const auto start = std::chrono::steady_clock::now();
      auto ids = zerofit::text::EncodeBatch(**tokenizer, docs, false, pool);
      if (!ids.ok()) return 1;
      batch_rates.push_back(mb / Seconds(start));
    }
    std::printf("  %d threads: %7.2f MB/s", o.threads, Median(batch_rates));
  }
  std::printf("\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, &o)) {
    std::cerr << "usage: zerofit_tokenizer_bench --hf-dir DIR --text FILE [--names a,b] [--reps N] "
                 "[--threads N] [--doc-bytes N] [--dump-ids DIR]\n";
    return 2;
  }
  auto text = zerofit::core::ReadTextFile(o.text_path);
  if (!text.ok()) {
    std::cerr << text.status() << "\n";
    return 1;
  }
  const std::vector<std::string_view> docs = SplitDocuments(*text, o.doc_bytes);
  const double mb = static_cast<double>(text->size()) / 1e6;
  for (const std::string& name : o.names) {
    if (int rc = RunOne(o, name, docs, mb); rc != 0) return rc;
  }
  return 0;
}
