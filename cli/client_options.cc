#include "cli/client_options.h"

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "cli/private_files.h"
#include "core/status_macros.h"
#include "core/text_file.h"

namespace zerofit::cli {
namespace {

absl::StatusOr<std::string> ReadTrimmed(const std::string& path) {
  ZF_ASSIGN_OR_RETURN(std::string text, core::ReadTextFile(path));
  return std::string(absl::StripAsciiWhitespace(text));
}

}  // namespace

std::string DefaultStateDir() {
  const char* home = std::getenv("HOME");
  return (std::filesystem::path(home ? home : ".") / ".zerofit").string();
}

absl::Status ResolveClientOptions(const std::string& state_dir, client::ConnectionOptions* o) {
  // A directory others can write could hold their address (the token would go to them) or their token.
  if ((o->address.empty() || o->token.empty()) && std::filesystem::exists(state_dir)) {
    ZF_RETURN_IF_ERROR(CheckPrivateDir(state_dir));
  }
  if (o->address.empty()) {
    auto a = ReadTrimmed((std::filesystem::path(state_dir) / "address").string());
    if (!a.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "no coordinator address: pass --coordinator HOST:PORT or start `zerofit serve --state-dir ",
          state_dir, "` (it writes ", state_dir, "/address)"));
    }
    o->address = *a;
  }
  if (o->token.empty()) {
    auto t = ReadTrimmed((std::filesystem::path(state_dir) / "token").string());
    if (!t.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("no token: set ZEROFIT_TOKEN, pass --token or --state-dir (`zerofit serve` writes ",
                       state_dir, "/token)"));
    }
    o->token = *t;
  }
  return absl::OkStatus();
}

}  // namespace zerofit::cli
