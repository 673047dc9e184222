// Hugging Face chat templates: the Jinja template of a model directory (chat_template.jinja, or the
// chat_template of tokenizer_config.json) that turns a list of chat
// messages into the prompt text, rendered exactly as transformers' apply_chat_template does (jinja2 with
// trim_blocks, lstrip_blocks, loop controls, its tojson, raise_exception and strftime_now).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "text/jinja/ast.h"
#include "text/jinja/interpreter.h"

namespace zerofit::text {

struct ChatTemplateOptions {
  // Appends the assistant prompt ("<|im_start|>assistant\n") when the template supports it.
  bool add_generation_prompt = false;
  // Special tokens; unset: the tokenizer config's (FromTokenizerConfig), else undefined in the template.
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  // Tool schemas (a JSON list) and RAG documents; null reaches the template as None, as in transformers.
  // A non-null `tools` selects the "tool_use" template of a config that names several.
  nlohmann::ordered_json tools;
  nlohmann::ordered_json documents;
  // More template variables (date_string, enable_thinking, ...), an object; they override the above.
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  // strftime_now's clock and zone (Python's datetime.now() is local time); unset `now`: absl::Now().
  std::optional<absl::Time> now;
  absl::TimeZone time_zone = absl::LocalTimeZone();
  RenderLimits limits;
};

// A parsed chat template (or the named set of a tokenizer config). Immutable after construction; Render
// is const and safe to call from several threads at once.
class ChatTemplate {
 public:
  // Bounds on what Parse accepts.
  static constexpr size_t kMaxSourceBytes = 1 << 20;
  static constexpr int kMaxNesting = 128;
  // Bound on the nesting of messages/tools JSON.
  static constexpr int kMaxJsonDepth = 64;

  // Parses one template. InvalidArgument "chat_template:LINE:COL: ..." for syntax errors and unsupported
  // constructs (extends, include, import, autoescape, the attr filter, ...).
  static absl::StatusOr<ChatTemplate> Parse(std::string source);

  // Reads `chat_template` from a tokenizer_config.json: a string, or transformers' list of
  // {"name", "template"} (Render picks "tool_use" when tools are given and it exists, else "default").
  // bos/eos/unk/pad tokens (strings or AddedToken dicts) become the template's defaults. NotFound when the
  // file or its chat_template is missing (gpt2 has none).
  static absl::StatusOr<ChatTemplate> FromTokenizerConfig(const std::string& path);

  // The chat templates of a model directory, found as transformers' from_pretrained finds them: when
  // chat_template.jinja ("default") or additional_chat_templates/<name>.jinja exist (transformers 4.47+
  // writes them), they are the templates and tokenizer_config.json's chat_template is ignored; otherwise
  // that chat_template. Special tokens come from tokenizer_config.json, which may be absent. NotFound when
  // the directory has no template; errors name the file.
  static absl::StatusOr<ChatTemplate> FromDirectory(const std::string& dir);
  // A replacement template, as TRL's chat_template_path gives one: `path` is a .jinja or .j2 file (the
  // default template) or a model directory (its templates, as FromDirectory finds them). The special tokens
  // are those of `tokenizer_dir`'s tokenizer_config.json (which may be absent), since transformers renders
  // whatever template a tokenizer holds with that tokenizer's own tokens. Errors name `path`.
  static absl::StatusOr<ChatTemplate> FromTemplatePath(const std::string& path,
                                                       const std::string& tokenizer_dir);
  static constexpr const char* kChatTemplateFile = "chat_template.jinja";
  static constexpr const char* kAdditionalTemplatesDir = "additional_chat_templates";
  // The named template files of `dir`: "additional_chat_templates/<name>.jinja", relative to it, sorted;
  // empty without that directory. InternalError when it cannot be listed.
  static absl::StatusOr<std::vector<std::string>> NamedTemplateFiles(const std::string& dir);

  // Renders `messages` (a JSON list of {"role", "content", ...}). Errors carry the template position;
  // raise_exception("msg") in the template fails with InvalidArgument containing "msg". Takes ordered_json
  // because Python dicts keep their key order and `tojson` prints it; a plain nlohmann::json converts
  // implicitly but arrives with its objects' keys sorted.
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& messages,
                                     const ChatTemplateOptions& options) const;

  // The template source Render would use for `options`.
  absl::StatusOr<std::string> Source(const ChatTemplateOptions& options) const;

  // Every template: its name ("default", "tool_use", ...) and source, in the order they were read.
  std::vector<std::pair<std::string, std::string>> NamedSources() const;

 private:
  struct Named {
    std::string name;
    std::string source;
    std::shared_ptr<const NodeList> program;
  };
  absl::StatusOr<const Named*> Pick(const ChatTemplateOptions& options) const;
  // Parses `source` as the template `name`; errors are prefixed with `where` (the file).
  absl::Status Add(const std::string& where, const std::string& name, std::string source);
  // tokenizer_config.json's chat_template entry: a string or a list of {"name", "template"}.
  absl::Status AddFromConfig(const std::string& path, const nlohmann::ordered_json& entry);
  void TakeSpecialTokens(const nlohmann::ordered_json& config);
  // The special tokens of `dir`'s tokenizer_config.json in place of the current ones; none without the file.
  absl::Status TakeSpecialTokensOf(const std::string& dir);

  std::vector<Named> templates_;
  std::map<std::string, std::string> special_tokens_;  // bos_token, eos_token, ... from the config
};

}  // namespace zerofit::text
