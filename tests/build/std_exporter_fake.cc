// A shared library that exports its own std::filesystem::remove_all, as pip's libtorch.so (2.11) does
// (pytorch#133437). This copy returns a sentinel instead of removing anything, so that a program can tell
// which definition its call reached (libstdcxx_first_probe.cc).
#include <cstdint>
#include <filesystem>
#include <system_error>

namespace std::filesystem {
std::uintmax_t remove_all(const path&, std::error_code& ec) {
  ec.clear();
  return 999;  // kFakeRemoveAll in libstdcxx_first_probe.cc
}
}  // namespace std::filesystem
