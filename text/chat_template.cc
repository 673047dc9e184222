#include "text/chat_template.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "core/text_file.h"
#include "text/jinja/json.h"
#include "text/jinja/parser.h"

namespace zerofit::text {
namespace {

// An added token is a string or an AddedToken dict {"content": ..., "__type": "AddedToken", ...}.
std::optional<std::string> TokenContent(const nlohmann::ordered_json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  return std::nullopt;
}

// transformers' template globals: raise_exception(message) and strftime_now(format).
std::vector<std::pair<std::string, Value>> TransformersGlobals(const ChatTemplateOptions& options) {
  std::vector<std::pair<std::string, Value>> g;
  g.emplace_back("raise_exception",
                 Value::Function("raise_exception", [](CallArgs& a) -> absl::StatusOr<Value> {
                   return absl::InvalidArgumentError(a.args.empty() ? "" : a.args[0].ToString());
                 }));
  absl::Time now = options.now ? *options.now : absl::Now();
  absl::TimeZone zone = options.time_zone;
  g.emplace_back("strftime_now",
                 Value::Function("strftime_now", [now, zone](CallArgs& a) -> absl::StatusOr<Value> {
                   if (a.args.empty() || !a.args[0].is_string()) {
                     return absl::InvalidArgumentError("strftime_now() needs a format string");
                   }
                   return Value::String(absl::FormatTime(a.args[0].str(), now, zone));
                 }));
  return g;
}

// A JSON file that must hold an object; errors name it.
absl::StatusOr<nlohmann::ordered_json> ReadConfigObject(const std::string& path) {
  ZF_ASSIGN_OR_RETURN(std::string text, core::ReadTextFile(path));
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  }
  return config;
}

struct TemplateFile {
  std::string name;  // "default" for chat_template.jinja, else the file's stem
  std::string path;
};

// The standalone template files of a model directory, as transformers' from_pretrained finds them:
// chat_template.jinja and additional_chat_templates/<name>.jinja (sorted, so that errors repeat).
absl::StatusOr<std::vector<TemplateFile>> TemplateFilesIn(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<TemplateFile> files;
  const fs::path root = fs::path(dir) / ChatTemplate::kChatTemplateFile;
  if (fs::is_regular_file(root)) files.push_back({"default", root.string()});
  ZF_ASSIGN_OR_RETURN(const std::vector<std::string> named, ChatTemplate::NamedTemplateFiles(dir));
  for (const std::string& name : named) {
    const fs::path path = fs::path(dir) / name;
    TemplateFile f{path.stem().string(), path.string()};
    if (f.name == "default" && !files.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(f.path, ": a second 'default' template next to ", root.string()));
    }
    files.push_back(std::move(f));
  }
  return files;
}

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::Parse(std::string source) {
  if (source.size() > kMaxSourceBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("chat template has ", source.size(), " bytes, more than ", kMaxSourceBytes));
  }
  ZF_ASSIGN_OR_RETURN(NodeList nodes, ParseTemplate(source, kMaxNesting));
  ChatTemplate t;
  t.templates_.push_back(
      Named{"default", std::move(source), std::make_shared<const NodeList>(std::move(nodes))});
  return t;
}

absl::Status ChatTemplate::Add(const std::string& where, const std::string& name, std::string source) {
  auto parsed = Parse(std::move(source));
  if (!parsed.ok()) {
    return absl::Status(parsed.status().code(),
                        absl::StrCat(where, ": template '", name, "': ", parsed.status().message()));
  }
  Named named = std::move(parsed->templates_[0]);
  named.name = name;
  templates_.push_back(std::move(named));
  return absl::OkStatus();
}

absl::Status ChatTemplate::AddFromConfig(const std::string& path, const nlohmann::ordered_json& entry) {
  auto text = [&](const std::string& name, const nlohmann::ordered_json& source) -> absl::Status {
    if (!source.is_string())
      return absl::InvalidArgumentError(absl::StrCat(path, ": chat template '", name, "' is not a string"));
    return Add(path, name, source.get<std::string>());
  };
  if (entry.is_string()) return text("default", entry);
  if (!entry.is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": chat_template must be a string or a list"));
  }
  for (const auto& named : entry) {
    if (!named.is_object() || !named.contains("name") || !named["name"].is_string() ||
        !named.contains("template")) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": chat_template entries need \"name\" and \"template\""));
    }
    ZF_RETURN_IF_ERROR(text(named["name"].get<std::string>(), named["template"]));
  }
  return absl::OkStatus();
}

void ChatTemplate::TakeSpecialTokens(const nlohmann::ordered_json& config) {
  for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
    auto tok = config.find(key);
    if (tok == config.end()) continue;
    if (auto content = TokenContent(*tok)) special_tokens_[key] = *content;
  }
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromTokenizerConfig(const std::string& path) {
  ZF_ASSIGN_OR_RETURN(const nlohmann::ordered_json config, ReadConfigObject(path));
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) {
    return absl::NotFoundError(absl::StrCat(path, ": no chat_template"));
  }
  ChatTemplate result;
  ZF_RETURN_IF_ERROR(result.AddFromConfig(path, *it));
  result.TakeSpecialTokens(config);
  return result;
}

absl::StatusOr<std::vector<std::string>> ChatTemplate::NamedTemplateFiles(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> names;
  const fs::path extra = fs::path(dir) / kAdditionalTemplatesDir;
  std::error_code ec;
  if (!fs::is_directory(extra, ec)) return names;
  for (const fs::directory_entry& e : fs::directory_iterator(extra, ec)) {
    if (e.path().extension() != ".jinja" || !e.is_regular_file()) continue;
    names.push_back(absl::StrCat(kAdditionalTemplatesDir, "/", e.path().filename().string()));
  }
  if (ec) return absl::InternalError(absl::StrCat(extra.string(), ": cannot be listed: ", ec.message()));
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromDirectory(const std::string& dir) {
  const std::string config_path = dir + "/tokenizer_config.json";
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
  if (std::filesystem::exists(config_path)) {
    ZF_ASSIGN_OR_RETURN(config, ReadConfigObject(config_path));
  }
  ChatTemplate result;
  ZF_ASSIGN_OR_RETURN(const std::vector<TemplateFile> files, TemplateFilesIn(dir));
  for (const TemplateFile& file : files) {
    ZF_ASSIGN_OR_RETURN(std::string source, core::ReadTextFile(file.path));
    ZF_RETURN_IF_ERROR(result.Add(file.path, file.name, std::move(source)));
  }
  auto it = config.find("chat_template");
  if (files.empty() && it != config.end() && !it->is_null()) {
    ZF_RETURN_IF_ERROR(result.AddFromConfig(config_path, *it));
  }
  if (result.templates_.empty()) {
    return absl::NotFoundError(absl::StrCat(dir, ": no chat template (", kChatTemplateFile, ", ",
                                            kAdditionalTemplatesDir,
                                            "/*.jinja or tokenizer_config.json's "
                                            "chat_template)"));
  }
  result.TakeSpecialTokens(config);
  return result;
}

absl::Status ChatTemplate::TakeSpecialTokensOf(const std::string& dir) {
  special_tokens_.clear();
  const std::string config_path = dir + "/tokenizer_config.json";
  if (!std::filesystem::exists(config_path)) return absl::OkStatus();
  ZF_ASSIGN_OR_RETURN(const nlohmann::ordered_json config, ReadConfigObject(config_path));
  TakeSpecialTokens(config);
  return absl::OkStatus();
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromTemplatePath(const std::string& path,
                                                            const std::string& tokenizer_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  ChatTemplate result;
  if (fs::is_directory(path, ec)) {
    ZF_ASSIGN_OR_RETURN(result, FromDirectory(path));
  } else if (fs::is_regular_file(path, ec)) {
    const std::string ext = fs::path(path).extension().string();
    if (ext != ".jinja" && ext != ".j2") {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": a chat template is a .jinja or .j2 file, or a model directory holding one"));
    }
    ZF_ASSIGN_OR_RETURN(std::string source, core::ReadTextFile(path));
    ZF_RETURN_IF_ERROR(result.Add(path, "default", std::move(source)));
  } else {
    return absl::NotFoundError(
        absl::StrCat(path, ": no such chat template (a .jinja or .j2 file, or a model directory)"));
  }
  ZF_RETURN_IF_ERROR(result.TakeSpecialTokensOf(tokenizer_dir));
  return result;
}

std::vector<std::pair<std::string, std::string>> ChatTemplate::NamedSources() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Named& t : templates_) out.emplace_back(t.name, t.source);
  return out;
}

absl::StatusOr<const ChatTemplate::Named*> ChatTemplate::Pick(const ChatTemplateOptions& options) const {
  auto find = [&](const char* name) -> const Named* {
    for (const Named& t : templates_) {
      if (t.name == name) return &t;
    }
    return nullptr;
  };
  if (!options.tools.is_null()) {
    if (const Named* t = find("tool_use")) return t;
  }
  if (const Named* t = find("default")) return t;
  return absl::InvalidArgumentError(
      "This model has multiple chat templates with no default specified! Please either pass a chat "
      "template or the name of the template you wish to use to the `chat_template` argument.");
}

absl::StatusOr<std::string> ChatTemplate::Source(const ChatTemplateOptions& options) const {
  ZF_ASSIGN_OR_RETURN(const Named* t, Pick(options));
  return t->source;
}

absl::StatusOr<std::string> ChatTemplate::Render(const nlohmann::ordered_json& messages,
                                                 const ChatTemplateOptions& options) const {
  ZF_ASSIGN_OR_RETURN(const Named* t, Pick(options));
  if (!messages.is_array()) return absl::InvalidArgumentError("chat messages must be a JSON list");
  if (!options.extra.is_object())
    return absl::InvalidArgumentError("ChatTemplateOptions::extra must be an object");
  std::vector<std::pair<std::string, Value>> globals = TransformersGlobals(options);
  for (const auto& [k, v] : special_tokens_) globals.emplace_back(k, Value::String(v));
  if (options.bos_token) globals.emplace_back("bos_token", Value::String(*options.bos_token));
  if (options.eos_token) globals.emplace_back("eos_token", Value::String(*options.eos_token));
  ZF_ASSIGN_OR_RETURN(Value msgs, ValueFromJson(messages, kMaxJsonDepth));
  ZF_ASSIGN_OR_RETURN(Value tools, ValueFromJson(options.tools, kMaxJsonDepth));
  ZF_ASSIGN_OR_RETURN(Value documents, ValueFromJson(options.documents, kMaxJsonDepth));
  globals.emplace_back("messages", std::move(msgs));
  globals.emplace_back("tools", std::move(tools));
  globals.emplace_back("documents", std::move(documents));
  globals.emplace_back("add_generation_prompt", Value::Bool(options.add_generation_prompt));
  for (const auto& [k, v] : options.extra.items()) {
    ZF_ASSIGN_OR_RETURN(Value value, ValueFromJson(v, kMaxJsonDepth));
    globals.emplace_back(k, std::move(value));
  }
  Interpreter interpreter(options.limits);
  return interpreter.Render(*t->program, std::move(globals));
}

}  // namespace zerofit::text
