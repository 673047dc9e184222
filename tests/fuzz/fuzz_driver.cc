// A portable replay-and-mutate driver for LLVMFuzzerTestOneInput targets (builds with g++, no libFuzzer):
// runs every seed file of the given corpus directories, then a fixed, seeded sequence of mutations of them
// (byte flips, inserts, deletes, duplicated ranges, splices and dictionary tokens for JSON and Jinja). The
// sequence is deterministic; --max-seconds only cuts it short on a slow machine (the count run is printed).
//
// A crash, an abort or an input running longer than --input-timeout seconds writes the input to
// --artifact (default ./fuzz-crash.bin) and exits non-zero; memory is capped with RLIMIT_AS
// (--rss-limit-mb, not under AddressSanitizer, whose shadow memory needs the address space).
//
// usage: DRIVER [--mutations N] [--seed S] [--max-len BYTES] [--max-seconds S] [--input-timeout S]
//               [--rss-limit-mb MB] [--artifact PATH] CORPUS_DIR_OR_FILE...
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

// The signal handlers need the input being run and where to save it; this state is process-wide by
// nature (a signal has no context argument), set before each input and read only by the handlers.
struct CrashState {
  const char* artifact = "fuzz-crash.bin";
  const std::string* input = nullptr;
};
CrashState g_crash;  // NOLINT: see above; the only global, written by main's thread only

void SaveInputAndDie(int sig) {
  // Async-signal-safe calls only.
  const char* what = sig == SIGALRM ? "timeout" : "crash";
  if (g_crash.input != nullptr) {
    int fd = open(g_crash.artifact, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd >= 0) {
      ssize_t ignored = write(fd, g_crash.input->data(), g_crash.input->size());
      (void)ignored;
      close(fd);
    }
  }
  static const char kMsg[] = "fuzz_driver: input failed (";
  ssize_t ignored = write(2, kMsg, sizeof(kMsg) - 1);
  ignored = write(2, what, std::strlen(what));
  ignored = write(2, "), saved to ", 12);
  ignored = write(2, g_crash.artifact, std::strlen(g_crash.artifact));
  ignored = write(2, "\n", 1);
  (void)ignored;
  _exit(sig == SIGALRM ? 3 : 2);
}

// splitmix64: small, seedable, the same on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t Next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t Below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(Next() % n); }

 private:
  uint64_t s_;
};

const char* const kDictionary[] = {"{",
                                   "}",
                                   "[",
                                   "]",
                                   "\"",
                                   ":",
                                   ",",
                                   "null",
                                   "true",
                                   "false",
                                   "0",
                                   "-1",
                                   "1e308",
                                   "4294967296",
                                   "\"type\"",
                                   "\"BPE\"",
                                   "\"vocab\"",
                                   "\"merges\"",
                                   "\"added_tokens\"",
                                   "\"normalizer\"",
                                   "\"pre_tokenizer\"",
                                   "\"decoder\"",
                                   "\"post_processor\"",
                                   "\"Sequence\"",
                                   "\"ByteLevel\"",
                                   "\"Metaspace\"",
                                   "\"Split\"",
                                   "\"pattern\"",
                                   "\"Regex\"",
                                   "\"content\"",
                                   "\"id\"",
                                   "\"special\"",
                                   "\"prompt\"",
                                   "\"chosen\"",
                                   "\"rejected\"",
                                   "\"prompt_ids\"",
                                   "\"chosen_ids\"",
                                   "\"role\"",
                                   "\"messages\"",
                                   "{{",
                                   "}}",
                                   "{%",
                                   "%}",
                                   "{#",
                                   "#}",
                                   "{%-",
                                   "-%}",
                                   "for ",
                                   " in ",
                                   " recursive",
                                   "endfor",
                                   "if ",
                                   "endif",
                                   "else",
                                   "elif",
                                   "set ",
                                   "macro ",
                                   "endmacro",
                                   "call",
                                   "loop(",
                                   "loop.depth",
                                   "|",
                                   "is ",
                                   "not ",
                                   "(",
                                   ")",
                                   "~",
                                   "*",
                                   "**",
                                   "'",
                                   "namespace(",
                                   "range(",
                                   "groupby(",
                                   "batch(",
                                   "tojson",
                                   "raise_exception(",
                                   "\n",
                                   "\xff",
                                   "\xe4\xb8\xad",
                                   "\xf0\x9f\x98\x80",
                                   "\\u0000",
                                   "\\ud800",
                                   "(?:",
                                   ")*",
                                   "\\p{L}",
                                   "+"};

std::string Mutate(const std::string& in, const std::vector<std::string>& seeds, Rng& rng, size_t max_len) {
  std::string s = in;
  const int rounds = 1 + static_cast<int>(rng.Below(4));
  for (int r = 0; r < rounds; ++r) {
    const size_t pos = rng.Below(s.size() + 1);
    switch (rng.Below(7)) {
      case 0:  // flip a bit
        if (!s.empty()) s[std::min(pos, s.size() - 1)] ^= static_cast<char>(1u << rng.Below(8));
        break;
      case 1:  // insert a random byte
        s.insert(pos, 1, static_cast<char>(rng.Below(256)));
        break;
      case 2:  // delete a range
        s.erase(pos, 1 + rng.Below(16));
        break;
      case 3: {  // duplicate a range (grows repetition: deep nesting, long words)
        const size_t len = 1 + rng.Below(64);
        const std::string piece = s.substr(pos, len);
        for (size_t k = 1 + rng.Below(8); k > 0; --k) s.insert(pos, piece);
        break;
      }
      case 4: {  // splice a piece of another seed
        const std::string& other = seeds[rng.Below(seeds.size())];
        const size_t from = rng.Below(other.size() + 1);
        s.insert(pos, other.substr(from, 1 + rng.Below(128)));
        break;
      }
      case 5:  // a dictionary token
        s.insert(pos, kDictionary[rng.Below(std::size(kDictionary))]);
        break;
      default:  // overwrite a byte with an interesting one
        if (!s.empty()) s[std::min(pos, s.size() - 1)] = "\0\n\"{}[]%\\\x7f\x80"[rng.Below(11)];
        break;
    }
  }
  if (s.size() > max_len) s.resize(max_len);
  return s;
}

bool ReadFile(const std::filesystem::path& path, std::string* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  out->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return true;
}

void RunOne(const std::string& input, int timeout_s) {
  g_crash.input = &input;
  alarm(static_cast<unsigned>(timeout_s));
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
  alarm(0);
  g_crash.input = nullptr;
}

bool UnderAddressSanitizer() {
#if defined(__SANITIZE_ADDRESS__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return true;
#endif
#endif
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t mutations = 2000, seed = 20261123;
  size_t max_len = 1 << 16;
  double max_seconds = 15;
  int input_timeout = 10;
  uint64_t rss_limit_mb = 2048;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::cerr << a << " needs a value\n";
        std::exit(64);
      }
      return argv[++i];
    };
    if (a == "--mutations") {
      mutations = std::strtoull(value(), nullptr, 10);
    } else if (a == "--seed") {
      seed = std::strtoull(value(), nullptr, 10);
    } else if (a == "--max-len") {
      max_len = std::strtoull(value(), nullptr, 10);
    } else if (a == "--max-seconds") {
      max_seconds = std::strtod(value(), nullptr);
    } else if (a == "--input-timeout") {
      input_timeout = std::atoi(value());
    } else if (a == "--rss-limit-mb") {
      rss_limit_mb = std::strtoull(value(), nullptr, 10);
    } else if (a == "--artifact") {
      g_crash.artifact = value();
    } else {
      paths.push_back(a);
    }
  }
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGALRM}) signal(sig, SaveInputAndDie);
  if (!UnderAddressSanitizer() && rss_limit_mb > 0) {
    rlimit limit{rss_limit_mb << 20, rss_limit_mb << 20};
    setrlimit(RLIMIT_AS, &limit);  // an allocation past it throws std::bad_alloc: an uncaught abort
  }
  std::vector<std::string> seeds;
  for (const std::string& p : paths) {
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(p)) {
      for (const auto& e : std::filesystem::directory_iterator(p)) files.push_back(e.path());
    } else {
      files.push_back(p);
    }
    std::sort(files.begin(), files.end());  // directory order is not deterministic
    for (const auto& f : files) {
      std::string data;
      if (!ReadFile(f, &data)) {
        std::cerr << "fuzz_driver: cannot read " << f << "\n";
        return 64;
      }
      seeds.push_back(std::move(data));
    }
  }
  if (seeds.empty()) {
    std::cerr << "fuzz_driver: no seeds (pass corpus directories or files)\n";
    return 64;
  }
  const auto start = std::chrono::steady_clock::now();
  for (const std::string& s : seeds) RunOne(s, input_timeout);
  Rng rng(seed);
  uint64_t done = 0;
  for (; done < mutations; ++done) {
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    if (elapsed.count() > max_seconds) break;
    RunOne(Mutate(seeds[rng.Below(seeds.size())], seeds, rng, max_len), input_timeout);
  }
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  std::cout << "fuzz_driver: " << seeds.size() << " seeds, " << done << " of " << mutations
            << " mutations in " << elapsed.count() << " s: no crash\n";
  return 0;
}
