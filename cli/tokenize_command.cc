#include "cli/tokenize_command.h"

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/ordered_line_map.h"
#include "core/thread_pool.h"
#include "nlohmann/json.hpp"

namespace zerofit::cli {
namespace {

using Json = nlohmann::ordered_json;

absl::Status LineError(const std::string& source, size_t line, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat(source, ":", line, ": ", message));
}

bool IsBlank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

// One input object to its output object; errors without the position (the caller adds it).
absl::StatusOr<Json> ProcessLine(Json obj, const text::Tokenizer& tok, const text::ChatTemplate* chat) {
  if (!obj.is_object())
    return absl::InvalidArgumentError(absl::StrCat("expected a JSON object, got ", obj.type_name()));
  auto text = obj.find("text");
  if (text != obj.end() && text->is_string()) {
    bool add_special = true;
    if (auto it = obj.find("add_special_tokens"); it != obj.end()) {
      if (!it->is_boolean())
        return absl::InvalidArgumentError("field 'add_special_tokens': expected a boolean");
      add_special = it->get<bool>();
    }
    auto ids = tok.Encode(text->get_ref<const std::string&>(), add_special);
    if (!ids.ok()) return absl::InvalidArgumentError(absl::StrCat("field 'text': ", ids.status().message()));
    Json tokens = Json::array();
    for (int32_t id : *ids) {
      auto t = tok.IdToToken(id);
      tokens.push_back(t ? Json(*t) : Json(nullptr));
    }
    auto decoded = tok.Decode(*ids, /*skip_special_tokens=*/false);
    if (!decoded.ok()) return decoded.status();
    obj["ids"] = *ids;
    obj["tokens"] = std::move(tokens);
    obj["decoded"] = *decoded;
    return obj;
  }
  auto messages = obj.find("messages");
  if (messages != obj.end() && messages->is_array()) {
    if (chat == nullptr) {
      return absl::FailedPreconditionError("field 'messages': the tokenizer has no chat template");
    }
    text::ChatTemplateOptions options;
    if (auto it = obj.find("add_generation_prompt"); it != obj.end()) {
      if (!it->is_boolean())
        return absl::InvalidArgumentError("field 'add_generation_prompt': expected a boolean");
      options.add_generation_prompt = it->get<bool>();
    }
    if (auto it = obj.find("tools"); it != obj.end()) options.tools = *it;
    if (auto it = obj.find("documents"); it != obj.end()) options.documents = *it;
    if (auto it = obj.find("template_kwargs"); it != obj.end()) {
      if (!it->is_object()) return absl::InvalidArgumentError("field 'template_kwargs': expected an object");
      options.extra = *it;
    }
    if (obj.contains("template_name")) {
      return absl::UnimplementedError(
          "field 'template_name': not supported (the template is picked by the presence of 'tools')");
    }
    auto rendered = chat->Render(*messages, options);
    if (!rendered.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("chat template: ", rendered.status().message()));
    }
    auto ids = tok.Encode(*rendered, /*add_special_tokens=*/false);
    if (!ids.ok()) return ids.status();
    obj["rendered"] = *rendered;
    obj["ids"] = *ids;
    return obj;
  }
  return absl::InvalidArgumentError("expected \"text\" (a string) or \"messages\" (a list)");
}

// One input line to its output line (without the newline); nullopt for a blank line. Errors carry the
// position. Safe to call concurrently (the tokenizer and template are).
absl::StatusOr<std::optional<std::string>> TokenizeLine(const core::InputLine& line,
                                                        const std::string& source, const text::Tokenizer& tok,
                                                        const text::ChatTemplate* chat) {
  if (IsBlank(line.text)) return std::nullopt;
  Json obj;
  // nlohmann reports parse and encoding errors by exception; translated here (STYLE 2).
  try {
    obj = Json::parse(line.text);
  } catch (const Json::exception& e) {
    std::string why = absl::StrCat("invalid JSON: ", e.what());
    if (line.unterminated) absl::StrAppend(&why, " (the last line has no newline: was the file cut off?)");
    return LineError(source, line.number, why);
  }
  auto result = ProcessLine(std::move(obj), tok, chat);
  if (!result.ok()) return LineError(source, line.number, std::string(result.status().message()));
  try {
    return result->dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::strict);
  } catch (const Json::exception& e) {
    return LineError(source, line.number, absl::StrCat("output is not valid UTF-8: ", e.what()));
  }
}

}  // namespace

absl::Status TokenizeJsonl(const text::Tokenizer& tok, const text::ChatTemplate* chat, std::istream& in,
                           const std::string& source, std::ostream& out, size_t* lines_written, int threads) {
  core::ThreadPool pool(core::ResolveThreadCount(threads));
  size_t written = 0;
  auto lines = core::OrderedLineMap<std::optional<std::string>>(
      in, pool, core::LineChunking{},
      [&](const core::InputLine& line) { return TokenizeLine(line, source, tok, chat); },
      [&](std::optional<std::string> result, const core::InputLine& line) {
        if (!result) return absl::OkStatus();  // blank line
        out << *result << '\n';
        if (!out) return absl::DataLossError(absl::StrCat("write failed at ", source, ":", line.number));
        ++written;
        return absl::OkStatus();
      });
  if (!lines.ok()) return lines.status();
  if (in.bad()) return absl::DataLossError(absl::StrCat(source, ": read failed after line ", *lines));
  if (lines_written != nullptr) *lines_written = written;
  return absl::OkStatus();
}

CLI::App* AddTokenizeCommand(CLI::App& app, TokenizeFlags* flags) {
  CLI::App* cmd = app.add_subcommand(
      "tokenize",
      "tokenize JSONL lines {\"text\"} or {\"messages\"} with a Hugging Face tokenizer; adds \"ids\"");
  cmd->add_option("--tokenizer", flags->tokenizer_dir,
                  "model directory with tokenizer.json (+ tokenizer_config.json)")
      ->required();
  cmd->add_option("--in", flags->in, "input JSONL, - for stdin")->capture_default_str();
  cmd->add_option("--out", flags->out, "output JSONL, - for stdout")->capture_default_str();
  cmd->add_option("--threads", flags->threads,
                  "tokenizing threads (0: all cores); the output is the same for every count")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  return cmd;
}

absl::Status RunTokenize(const TokenizeFlags& flags) {
  auto tok = text::Tokenizer::FromFile(flags.tokenizer_dir + "/tokenizer.json");
  if (!tok.ok()) return tok.status();
  std::optional<text::ChatTemplate> chat;
  auto loaded = text::ChatTemplate::FromTokenizerConfig(flags.tokenizer_dir + "/tokenizer_config.json");
  if (loaded.ok()) {
    chat = std::move(*loaded);
  } else if (!absl::IsNotFound(loaded.status())) {
    return loaded.status();  // a template that does not parse is an error even for text-only input
  }
  std::ifstream in_file;
  std::istream* in = &std::cin;
  const std::string source = flags.in == "-" ? "<stdin>" : flags.in;
  if (flags.in != "-") {
    in_file.open(flags.in, std::ios::binary);
    if (!in_file) return absl::NotFoundError(absl::StrCat(flags.in, ": cannot open: ", std::strerror(errno)));
    in = &in_file;
  }
  std::ofstream out_file;
  std::ostream* out = &std::cout;
  if (flags.out != "-") {
    out_file.open(flags.out, std::ios::binary | std::ios::trunc);
    if (!out_file) {
      return absl::PermissionDeniedError(absl::StrCat(flags.out, ": cannot write: ", std::strerror(errno)));
    }
    out = &out_file;
  }
  absl::Status s = TokenizeJsonl(**tok, chat ? &*chat : nullptr, *in, source, *out, nullptr, flags.threads);
  if (!s.ok()) return s;
  out->flush();
  if (!*out)
    return absl::DataLossError(absl::StrCat(flags.out == "-" ? "<stdout>" : flags.out, ": write failed"));
  return absl::OkStatus();
}

}  // namespace zerofit::cli
