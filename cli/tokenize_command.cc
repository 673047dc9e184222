#include "cli/tokenize_command.h"

#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/line_reader.h"
#include "core/ordered_line_map.h"
#include "core/status_macros.h"
#include "core/thread_pool.h"
#include "nlohmann/json.hpp"

namespace zerofit::cli {
namespace {

using Json = nlohmann::ordered_json;

absl::Status LineError(const std::string& source, size_t line, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat(source, ":", line, ": ", message));
}

bool IsBlank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

// Adds the output fields of one input object to `obj`; on error `obj` is unchanged (a refused line is
// written as its input plus "error"), and the error carries no position (the caller adds it).
absl::Status ProcessLine(Json& obj, const text::TokenizerJson& tok, const text::ChatTemplate* chat) {
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
    return absl::OkStatus();
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
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError("expected \"text\" (a string) or \"messages\" (a list)");
}

// One output line (without the newline); `error` is empty unless the line was refused.
struct OutputLine {
  std::string json;
  std::string error;  // "SOURCE:LINE: why"
};

// A refused line as the oracle writes it: `input` (the parsed object, or {"input": "<the line>"} when the
// line is not a JSON object) plus "error". Invalid UTF-8 in the line becomes U+FFFD, so the output line is
// always valid JSON.
OutputLine RefusedLine(Json input, const core::InputLine& line, const std::string& source,
                       const std::string& why) {
  if (!input.is_object()) input = Json{{"input", line.text}};
  OutputLine result;
  result.error = absl::StrCat(source, ":", line.number, ": ", why);
  input["error"] = result.error;
  result.json = input.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
  return result;
}

// One input line to its output line; nullopt for a blank line. A refused line becomes an error (with the
// position) under fail_fast, else a RefusedLine. Safe to call concurrently (the tokenizer and template are).
absl::StatusOr<std::optional<OutputLine>> TokenizeLine(const core::InputLine& line, const std::string& source,
                                                       const text::TokenizerJson& tok,
                                                       const text::ChatTemplate* chat, bool fail_fast) {
  if (IsBlank(line.text)) return std::nullopt;
  auto refuse = [&](Json input, const std::string& why) -> absl::StatusOr<std::optional<OutputLine>> {
    if (fail_fast) return LineError(source, line.number, why);
    return RefusedLine(std::move(input), line, source, why);
  };
  Json obj;
  // nlohmann reports parse and encoding errors by exception; translated here (STYLE 2).
  try {
    obj = Json::parse(line.text);
  } catch (const Json::exception& e) {
    std::string why = absl::StrCat("invalid JSON: ", e.what());
    if (line.unterminated) absl::StrAppend(&why, " (the last line has no newline: was the file cut off?)");
    return refuse(Json(), why);
  }
  if (!obj.is_object()) return refuse(Json(), absl::StrCat("expected a JSON object, got ", obj.type_name()));
  if (absl::Status s = ProcessLine(obj, tok, chat); !s.ok())
    return refuse(std::move(obj), std::string(s.message()));
  try {
    return OutputLine{obj.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::strict), ""};
  } catch (const Json::exception& e) {
    // The line as read (its parse succeeded above), without the fields that do not encode.
    return refuse(Json::parse(line.text), absl::StrCat("output is not valid UTF-8: ", e.what()));
  }
}

// Opening --out truncates it: when it is the input (the same name, a link to it, a hard link), the input
// would be emptied before a line of it is read, and the run would "succeed" with an empty file.
absl::Status CheckOutIsNotIn(const TokenizeFlags& flags) {
  if (flags.in == "-" || flags.out == "-") return absl::OkStatus();
  struct stat in {};
  struct stat out {};
  if (::stat(flags.in.c_str(), &in) != 0 || ::stat(flags.out.c_str(), &out) != 0) return absl::OkStatus();
  if (in.st_dev != out.st_dev || in.st_ino != out.st_ino) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--out ", flags.out, " is the input (--in ", flags.in,
                                                 "): writing it would empty it before it is read; write "
                                                 "the output to another file"));
}

}  // namespace

absl::StatusOr<TokenizeReport> TokenizeJsonl(const text::TokenizerJson& tok, const text::ChatTemplate* chat,
                                             std::istream& in, const std::string& source, std::ostream& out,
                                             const TokenizeOptions& options) {
  core::ThreadPool pool(core::ResolveThreadCount(options.threads));
  TokenizeReport report;
  core::LineChunking chunking;
  chunking.source = source;
  auto lines = core::OrderedLineMap<std::optional<OutputLine>>(
      in, pool, chunking,
      [&](const core::InputLine& line) { return TokenizeLine(line, source, tok, chat, options.fail_fast); },
      [&](std::optional<OutputLine> result, const core::InputLine& line) {
        if (!result) return absl::OkStatus();  // blank line
        out << result->json << '\n';
        if (!out) return absl::DataLossError(absl::StrCat("write failed at ", source, ":", line.number));
        ++report.lines_written;
        if (!result->error.empty()) {
          if (report.refused++ == 0) report.first_error = std::move(result->error);
        }
        return absl::OkStatus();
      });
  if (!lines.ok()) return lines.status();
  if (in.bad()) return absl::DataLossError(absl::StrCat(source, ": read failed after line ", *lines));
  return report;
}

CLI::App* AddTokenizeCommand(CLI::App& app, TokenizeFlags* flags) {
  CLI::App* cmd = app.add_subcommand(
      "tokenize",
      "tokenize JSONL lines {\"text\"} or {\"messages\"} with a Hugging Face tokenizer; adds \"ids\".\n"
      "A refused line (bad JSON or field, a conversation the chat template rejects) is written with an\n"
      "\"error\" field naming FILE:LINE and the run goes on; the exit status is then 1, with the count on\n"
      "stderr (2: the run could not start, or stopped at --fail-fast)");
  cmd->add_option("--tokenizer", flags->tokenizer_dir,
                  "model directory with tokenizer.json (+ tokenizer_config.json)")
      ->required();
  cmd->add_option(
      "--chat-template", flags->chat_template,
      "a .jinja/.j2 file or model directory whose chat template replaces the tokenizer's (rendered "
      "with the tokenizer's special tokens, as a job's data.chat_template)");
  cmd->add_option("--in", flags->in, "input JSONL, - for stdin")->capture_default_str();
  cmd->add_option("--out", flags->out, "output JSONL, - for stdout")->capture_default_str();
  cmd->add_option("--threads", flags->threads,
                  "tokenizing threads (0: all cores); the output is the same for every count")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_flag(
      "--fail-fast", flags->fail_fast,
      "stop at the first refused line with its FILE:LINE error (exit 2) instead of writing it with an "
      "\"error\" field; the lines before it are written");
  return cmd;
}

absl::StatusOr<TokenizeReport> RunTokenize(const TokenizeFlags& flags) {
  auto tok = text::TokenizerJson::FromFile(flags.tokenizer_dir + "/tokenizer.json");
  if (!tok.ok()) return tok.status();
  std::optional<text::ChatTemplate> chat;
  auto loaded = flags.chat_template.empty()
                    ? text::ChatTemplate::FromDirectory(flags.tokenizer_dir)
                    : text::ChatTemplate::FromTemplatePath(flags.chat_template, flags.tokenizer_dir);
  if (loaded.ok()) {
    chat = std::move(*loaded);
  } else if (!absl::IsNotFound(loaded.status()) || !flags.chat_template.empty()) {
    return loaded
        .status();  // a template that does not parse (or was named) is an error even for text-only input
  }
  std::ifstream in_file;
  std::istream* in = &std::cin;
  const std::string source = flags.in == "-" ? "<stdin>" : flags.in;
  if (flags.in != "-") {
    ZF_RETURN_IF_ERROR(core::OpenLineInput(flags.in, &in_file));
    in = &in_file;
  }
  if (absl::Status same = CheckOutIsNotIn(flags); !same.ok()) return same;
  std::ofstream out_file;
  std::ostream* out = &std::cout;
  if (flags.out != "-") {
    out_file.open(flags.out, std::ios::binary | std::ios::trunc);
    if (!out_file) {
      return absl::PermissionDeniedError(absl::StrCat(flags.out, ": cannot write: ", std::strerror(errno)));
    }
    out = &out_file;
  }
  TokenizeOptions options;
  options.threads = flags.threads;
  options.fail_fast = flags.fail_fast;
  auto report = TokenizeJsonl(**tok, chat ? &*chat : nullptr, *in, source, *out, options);
  if (!report.ok()) return report.status();
  out->flush();
  if (!*out)
    return absl::DataLossError(absl::StrCat(flags.out == "-" ? "<stdout>" : flags.out, ": write failed"));
  return report;
}

std::string RefusedLinesMessage(const TokenizeReport& report, const TokenizeFlags& flags) {
  return absl::StrCat(
      report.refused, " of ", report.lines_written, " lines refused; each is written to ",
      flags.out == "-" ? "<stdout>" : flags.out,
      " with an \"error\" field (--fail-fast stops at the first). The first: ", report.first_error);
}

}  // namespace zerofit::cli
