// A LibTorch program's std:: functions are libstdc++'s (issue 28): pip's libtorch.so (2.11) defines its own
// std::filesystem::remove_all, which called a null pointer when a program bound to it, so the LibTorch
// targets put libstdc++ first among their shared libraries (worker/torch/CMakeLists.txt). Here the address
// the program calls is looked up among the loaded objects, and the functions are run.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace zerofit::worker {
namespace {

namespace fs = std::filesystem;

// The file name of the loaded object that defines the function the program calls.
template <typename Function>
std::string DefiningObject(Function* function) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(function), &info) == 0 || info.dli_fname == nullptr)
    return "<none>";
  return info.dli_fname;
}

TEST(StdSymbolsTest, FilesystemFunctionsAreLibstdcxxs) {
  // A LibTorch call, so that libtorch is loaded and needed whatever the linker keeps.
  ASSERT_EQ(torch::ones({2}).sum().item<float>(), 2.0f);
  using RemoveAllEc = std::uintmax_t (*)(const fs::path&, std::error_code&);
  using RemoveAll = std::uintmax_t (*)(const fs::path&);
  using CreateDirectories = bool (*)(const fs::path&);
  const std::string remove_all_ec = DefiningObject(static_cast<RemoveAllEc>(&fs::remove_all));
  const std::string remove_all = DefiningObject(static_cast<RemoveAll>(&fs::remove_all));
  const std::string create_directories =
      DefiningObject(static_cast<CreateDirectories>(&fs::create_directories));
  EXPECT_NE(remove_all_ec.find("libstdc++"), std::string::npos) << remove_all_ec;
  EXPECT_NE(remove_all.find("libstdc++"), std::string::npos) << remove_all;
  EXPECT_NE(create_directories.find("libstdc++"), std::string::npos) << create_directories;
}

TEST(StdSymbolsTest, RemoveAllRemovesATree) {
  ASSERT_EQ(torch::zeros({1}).numel(), 1);
  const fs::path root = fs::temp_directory_path() / ("zerofit_std_symbols_" + std::to_string(getpid()));
  fs::create_directories(root / "a" / "b");
  std::ofstream(root / "a" / "b" / "f") << "x";
  std::error_code ec;
  EXPECT_EQ(fs::remove_all(root, ec), 4u) << ec.message();
  EXPECT_FALSE(fs::exists(root));
}

}  // namespace
}  // namespace zerofit::worker
