#include "text/chat_template.h"

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

absl::StatusOr<ChatTemplate> ChatTemplate::FromTokenizerConfig(const std::string& path) {
  ZF_ASSIGN_OR_RETURN(std::string text, core::ReadTextFile(path));
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  }
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) {
    return absl::NotFoundError(absl::StrCat(path, ": no chat_template"));
  }
  ChatTemplate result;
  auto add = [&](const std::string& name, const nlohmann::ordered_json& source) -> absl::Status {
    if (!source.is_string())
      return absl::InvalidArgumentError(absl::StrCat(path, ": chat template '", name, "' is not a string"));
    auto parsed = Parse(source.get<std::string>());
    if (!parsed.ok()) {
      return absl::Status(parsed.status().code(),
                          absl::StrCat(path, ": template '", name, "': ", parsed.status().message()));
    }
    Named named = std::move(parsed->templates_[0]);
    named.name = name;
    result.templates_.push_back(std::move(named));
    return absl::OkStatus();
  };
  if (it->is_string()) {
    ZF_RETURN_IF_ERROR(add("default", *it));
  } else if (it->is_array()) {
    for (const auto& entry : *it) {
      if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() ||
          !entry.contains("template")) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": chat_template entries need \"name\" and \"template\""));
      }
      ZF_RETURN_IF_ERROR(add(entry["name"].get<std::string>(), entry["template"]));
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat(path, ": chat_template must be a string or a list"));
  }
  for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
    auto tok = config.find(key);
    if (tok == config.end()) continue;
    if (auto content = TokenContent(*tok)) result.special_tokens_[key] = *content;
  }
  return result;
}

absl::StatusOr<const ChatTemplate::Named*> ChatTemplate::Pick(const ChatTemplateOptions& options) const {
  if (templates_.size() == 1) return &templates_[0];
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
