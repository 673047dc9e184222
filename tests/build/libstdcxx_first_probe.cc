// Which std::filesystem::remove_all a program's call reaches when a shared library it links exports a copy
// (std_exporter_fake.cc stands for pip's libtorch.so) and the toolchain's search path holds only
// libstdc++.a (the H200 machine's /opt/gcc g++). libstdcxx_first_tests.cmake links this program twice: with
// zerofit_libstdcxx_first (cmake/ZerofitLibstdcxxFirst.cmake; expected: libstdc++'s) and with the mechanism
// it replaced, an early -lstdc++ (expected: the fake's, which shows the test reproduces the fault).
//   libstdcxx_first_probe libstdc++|fake    exit 0 when the call reached the expected definition
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace {
constexpr std::uintmax_t kFakeRemoveAll = 999;  // what std_exporter_fake.cc's copy returns
}

int main(int argc, char** argv) {
  if (argc != 2 || (std::strcmp(argv[1], "libstdc++") != 0 && std::strcmp(argv[1], "fake") != 0)) {
    std::fprintf(stderr, "usage: %s libstdc++|fake\n", argv[0]);
    return 2;
  }
  // A path that does not exist: libstdc++'s remove_all removes nothing and returns 0.
  const std::filesystem::path missing =
      std::filesystem::path("/nonexistent-zerofit-probe") / std::to_string(::getpid());
  std::error_code ec;
  const std::uintmax_t removed = std::filesystem::remove_all(missing, ec);
  const char* reached = removed == kFakeRemoveAll ? "fake" : "libstdc++";
  std::printf("std::filesystem::remove_all reached %s's copy (returned %ju%s%s); expected %s's\n", reached,
              removed, ec ? ", " : "", ec ? ec.message().c_str() : "", argv[1]);
  if (removed != kFakeRemoveAll && removed != 0) return 1;
  return std::strcmp(reached, argv[1]) == 0 ? 0 : 1;
}
