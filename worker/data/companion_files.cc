#include "worker/data/companion_files.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "text/chat_template.h"

namespace zerofit::data {
namespace {

namespace fs = std::filesystem;

bool SameDirectory(const std::string& a, const std::string& b) {
  std::error_code ec;
  return !a.empty() && !b.empty() && fs::equivalent(a, b, ec);
}

// Every companion name `dir` may hold for one source: the tokenizer's (tokenizer = true) or the model's.
std::vector<std::string> KnownNames(const fs::path& dir, bool tokenizer) {
  if (!tokenizer) return {kGenerationConfigName};
  std::vector<std::string> names(std::begin(kTokenizerFileNames), std::end(kTokenizerFileNames));
  // A directory that cannot be listed offers no named templates, to copy or to remove.
  for (std::string& n :
       text::ChatTemplate::NamedTemplateFiles(dir.string()).value_or(std::vector<std::string>{}))
    names.push_back(std::move(n));
  return names;
}

std::vector<CompanionFile> ExistingIn(const std::string& dir, bool tokenizer) {
  std::vector<CompanionFile> out;
  if (dir.empty()) return out;
  std::error_code ec;
  for (const std::string& name : KnownNames(dir, tokenizer)) {
    const fs::path from = fs::path(dir) / name;
    if (fs::is_regular_file(from, ec)) out.push_back({from.string(), name});
  }
  return out;
}

// Copies `from` to `to` through a temporary file in `to`'s directory and a rename.
absl::Status CopyAtomically(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::create_directories(to.parent_path(), ec);
  if (ec)
    return absl::InternalError(absl::StrCat("cannot create ", to.parent_path().string(), ": ", ec.message()));
  const fs::path tmp = fs::path(to.string() + ".tmp." + std::to_string(::getpid()));
  fs::copy_file(from, tmp, fs::copy_options::overwrite_existing, ec);
  if (!ec) fs::rename(tmp, to, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    return absl::InternalError(
        absl::StrCat("cannot copy ", from.string(), " to ", to.string(), ": ", ec.message()));
  }
  return absl::OkStatus();
}

// Writes one source's companions into `export_dir` and removes that source's stale names there.
absl::Status WriteGroup(const std::string& source_dir, bool tokenizer, const fs::path& export_dir) {
  if (SameDirectory(source_dir, export_dir.string())) return absl::OkStatus();
  const std::vector<CompanionFile> files = ExistingIn(source_dir, tokenizer);
  for (const CompanionFile& f : files) ZF_RETURN_IF_ERROR(CopyAtomically(f.from, export_dir / f.name));
  for (const std::string& name : KnownNames(export_dir, tokenizer)) {
    const bool copied =
        std::any_of(files.begin(), files.end(), [&](const CompanionFile& f) { return f.name == name; });
    if (copied) continue;
    std::error_code ec;
    fs::remove(export_dir / name, ec);  // false without an error when there is no such file
    if (ec) {
      return absl::InternalError(absl::StrCat("cannot remove ", (export_dir / name).string(),
                                              " (left by an earlier export): ", ec.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<CompanionFile> CompanionFilesOf(const std::string& model_dir, const std::string& tokenizer_dir) {
  std::vector<CompanionFile> files = ExistingIn(tokenizer_dir, /*tokenizer=*/true);
  for (CompanionFile& f : ExistingIn(model_dir, /*tokenizer=*/false)) files.push_back(std::move(f));
  return files;
}

absl::Status WriteCompanionFiles(const std::string& model_dir, const std::string& tokenizer_dir,
                                 const std::string& export_dir) {
  ZF_RETURN_IF_ERROR(WriteGroup(tokenizer_dir, /*tokenizer=*/true, export_dir));
  return WriteGroup(model_dir, /*tokenizer=*/false, export_dir);
}

}  // namespace zerofit::data
