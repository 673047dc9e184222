#include "worker/data/companion_files.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <optional>
#include <sstream>
#include <system_error>

#include "absl/numeric/int128.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/status_macros.h"
#include "core/text_file.h"
#include "nlohmann/json.hpp"
#include "text/chat_template.h"

namespace zerofit::data {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

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

// One file of the export: copied from `from`, or (text set) written with that text.
struct Output {
  std::string name;
  std::string from;
  std::optional<std::string> text;
};

bool IsTemplateFile(const std::string& name) {
  return name == text::ChatTemplate::kChatTemplateFile || name == "chat_template.json" ||
         absl::StartsWith(name, absl::StrCat(text::ChatTemplate::kAdditionalTemplatesDir, "/"));
}

// An eos_token entry set to `token`: an AddedToken dict keeps its flags, anything else becomes the string.
void SetEosToken(Json* config, const std::string& token) {
  auto it = config->find("eos_token");
  if (it != config->end() && it->is_object()) {
    (*it)["content"] = token;
  } else {
    (*config)["eos_token"] = token;
  }
}

// `j` as Python's json.dumps(indent=2) writes it, integers beyond 64 bits included: nlohmann reads those
// as doubles, and a tokenizer_config.json's model_max_length is often transformers' VERY_LARGE_INTEGER,
// int(1e30), which must stay an integer (a float breaks the tokenizer's truncation). Such a double is the
// integer exactly, so it is printed back in full.
std::string DumpKeepingIntegers(Json j) {
  std::vector<std::string> digits;
  std::function<void(Json&)> mark = [&](Json& v) {
    if (v.is_structured()) {
      for (Json& child : v) mark(child);
      return;
    }
    const double d = v.is_number_float() ? v.get<double>() : 0;
    if (std::fabs(d) < 0x1p63 || std::fabs(d) >= 0x1p127 || std::floor(d) != d) return;
    std::ostringstream text;
    text << (d < 0 ? "-" : "") << absl::uint128(std::fabs(d));
    v = absl::StrCat("\x01zf-integer-", digits.size());
    digits.push_back(text.str());
  };
  mark(j);
  std::string out = j.dump(2, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
  for (size_t i = 0; i < digits.size(); ++i) {
    absl::StrReplaceAll({{absl::StrCat("\"\\u0001zf-integer-", i, "\""), digits[i]}}, &out);
  }
  return out + "\n";
}

// tokenizer_config.json or special_tokens_map.json as the overrides change it; nullopt when they do not.
absl::StatusOr<std::optional<std::string>> Rewritten(const CompanionFile& f, const TokenizerOverrides& o) {
  const bool config = f.name == "tokenizer_config.json";
  const bool eos = !o.eos_token.empty() && (config || f.name == "special_tokens_map.json");
  const bool drop_template = config && !o.chat_template.empty();
  if (!eos && !drop_template) return std::optional<std::string>();
  ZF_ASSIGN_OR_RETURN(const std::string text, core::ReadTextFile(f.from));
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(f.from, ": not a JSON object"));
  if (eos) SetEosToken(&j, o.eos_token);
  if (drop_template) j.erase("chat_template");
  return std::optional<std::string>(DumpKeepingIntegers(std::move(j)));
}

// The replacing chat templates as transformers saves them: the default one as chat_template.jinja, the
// named ones under additional_chat_templates/.
absl::StatusOr<std::vector<Output>> TemplateOutputs(const TokenizerOverrides& o,
                                                    const std::string& tokenizer_dir) {
  ZF_ASSIGN_OR_RETURN(const text::ChatTemplate t,
                      text::ChatTemplate::FromTemplatePath(o.chat_template, tokenizer_dir));
  std::vector<Output> out;
  for (auto& [name, source] : t.NamedSources()) {
    if (name == "default") {
      out.push_back({text::ChatTemplate::kChatTemplateFile, "", source});
      continue;
    }
    if (name.empty() || name == "." || name == ".." || name.find_first_of("/\\") != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(o.chat_template, ": the template name '", name, "' cannot name a file"));
    }
    out.push_back(
        {absl::StrCat(text::ChatTemplate::kAdditionalTemplatesDir, "/", name, ".jinja"), "", source});
  }
  return out;
}

// What one source's group puts in the export: its files (the tokenizer's as `overrides` change them).
absl::StatusOr<std::vector<Output>> GroupOutputs(const std::string& source_dir, bool tokenizer,
                                                 const TokenizerOverrides& overrides) {
  std::vector<Output> out;
  for (const CompanionFile& f : ExistingIn(source_dir, tokenizer)) {
    if (tokenizer && !overrides.chat_template.empty() && IsTemplateFile(f.name)) continue;
    Output o{f.name, f.from, std::nullopt};
    if (tokenizer) {
      ZF_ASSIGN_OR_RETURN(o.text, Rewritten(f, overrides));
    }
    out.push_back(std::move(o));
  }
  const bool has_config =
      std::any_of(out.begin(), out.end(), [](const Output& o) { return o.name == "tokenizer_config.json"; });
  if (tokenizer && !source_dir.empty() && !overrides.eos_token.empty() && !has_config) {
    Json config = Json::object();  // transformers writes one whatever the source had
    SetEosToken(&config, overrides.eos_token);
    out.push_back({"tokenizer_config.json", "", config.dump(2) + "\n"});
  }
  if (tokenizer && !source_dir.empty() && !overrides.chat_template.empty()) {
    ZF_ASSIGN_OR_RETURN(std::vector<Output> templates, TemplateOutputs(overrides, source_dir));
    for (Output& t : templates) out.push_back(std::move(t));
  }
  return out;
}

absl::Status WriteOutput(const Output& o, const fs::path& export_dir, bool same_directory) {
  const fs::path to = export_dir / o.name;
  if (!o.text) return same_directory ? absl::OkStatus() : CopyAtomically(o.from, to);
  std::error_code ec;
  fs::create_directories(to.parent_path(), ec);
  if (ec)
    return absl::InternalError(absl::StrCat("cannot create ", to.parent_path().string(), ": ", ec.message()));
  return core::WriteTextFileAtomic(to.string(), *o.text);
}

// Writes one source's companions into `export_dir` and removes that source's stale names there. All of the
// group's sources are read before the first write.
absl::Status WriteGroup(const std::string& source_dir, bool tokenizer, const fs::path& export_dir,
                        const TokenizerOverrides& overrides) {
  const bool same = SameDirectory(source_dir, export_dir.string());
  if (same && overrides.empty()) return absl::OkStatus();
  ZF_ASSIGN_OR_RETURN(const std::vector<Output> outputs, GroupOutputs(source_dir, tokenizer, overrides));
  for (const Output& o : outputs) ZF_RETURN_IF_ERROR(WriteOutput(o, export_dir, same));
  for (const std::string& name : KnownNames(export_dir, tokenizer)) {
    const bool written =
        std::any_of(outputs.begin(), outputs.end(), [&](const Output& o) { return o.name == name; });
    if (written) continue;
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
                                 const std::string& export_dir, const TokenizerOverrides& overrides) {
  ZF_RETURN_IF_ERROR(WriteGroup(tokenizer_dir, /*tokenizer=*/true, export_dir, overrides));
  return WriteGroup(model_dir, /*tokenizer=*/false, export_dir, TokenizerOverrides{});
}

}  // namespace zerofit::data
