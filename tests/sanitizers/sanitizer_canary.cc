// A program with one deliberate defect per argument, run by the sanitizer builds' canary tests
// (sanitizer_tests.cmake): each must fail with its sanitizer's report, which proves that the build is
// instrumented and that the runtime options (leak detection, no UBSan recovery, TSan's exit code) are the
// ones every other test runs with. Never built without ZEROFIT_SANITIZE.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <thread>

namespace {

// UBSan's object-size check would report the store first; this canary is AddressSanitizer's.
__attribute__((no_sanitize("undefined"))) int HeapOverflow() {
  volatile char* p = new char[8];  // volatile: the store below must not be optimised away
  p[8] = 1;                        // one past the end
  delete[] p;
  return 0;
}

// UBSan's null checks are off (cmake/ZerofitSanitize.cmake): an access through a null pointer is ASan's SEGV.
int NullWrite() {
  int* volatile p = nullptr;  // volatile: the store below must not be optimised away
  *p = 1;
  return 0;
}

int Leak() {
  static void* volatile sink;
  sink = std::malloc(64);
  sink = nullptr;  // the only pointer is gone
  return 0;
}

int SignedOverflow() {
  volatile int big = std::numeric_limits<int>::max();
  volatile int sum = big + 1;
  return sum == 0 ? 1 : 0;
}

// Many unordered writes on each side, where one pair is enough for a report: with a single write per thread,
// TSan stayed silent in about 1 of 400 runs on a loaded 2-core machine (2026-11-27), failing the canary.
int Race() {
  static int counter = 0;  // written by two threads without a lock
  auto bump = [] {
    for (int i = 0; i < 10000; ++i) ++counter;
  };
  std::thread t(bump);
  bump();
  t.join();
  return counter == 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const char* what = argc > 1 ? argv[1] : "";
  if (std::strcmp(what, "heap-overflow") == 0) return HeapOverflow();
  if (std::strcmp(what, "null-write") == 0) return NullWrite();
  if (std::strcmp(what, "leak") == 0) return Leak();
  if (std::strcmp(what, "signed-overflow") == 0) return SignedOverflow();
  if (std::strcmp(what, "race") == 0) return Race();
  std::fprintf(stderr, "usage: %s heap-overflow|null-write|leak|signed-overflow|race\n", argv[0]);
  return 2;
}
