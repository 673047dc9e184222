#include "worker/data/hf_tokenizer.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "nlohmann/json.hpp"

namespace zerofit::data {
namespace {

using Json = nlohmann::ordered_json;

// Optional JSON file: nullopt when it does not exist; InvalidArgument naming it when it does not parse.
absl::StatusOr<std::optional<Json>> ReadOptionalJson(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::optional<Json>();
  std::ostringstream buf;
  buf << in.rdbuf();
  // nlohmann reports by exception; translated where it is called (STYLE 2).
  try {
    return std::optional<Json>(Json::parse(buf.str()));
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": invalid JSON: ", e.what()));
  }
}

// The token text of a config's special-token entry: a string, or an AddedToken dict {"content": ...}.
std::optional<std::string> TokenText(const Json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    auto c = it->find("content");
    if (c != it->end() && c->is_string()) return c->get<std::string>();
  }
  return std::nullopt;
}

// config.json's *_token_id: an integer or a list of them (the first is taken); -1 when absent.
int32_t ConfigId(const std::optional<Json>& model_config, const char* key) {
  if (!model_config || !model_config->is_object()) return -1;
  auto it = model_config->find(key);
  if (it == model_config->end()) return -1;
  const Json* v = &*it;
  if (v->is_array() && !v->empty()) v = &(*v)[0];
  if (v->is_number_integer()) {
    const int64_t id = v->get<int64_t>();
    if (id >= 0 && id < (int64_t{1} << 31)) return static_cast<int32_t>(id);
  }
  return -1;
}

// ChatExtras into the template's options: tools a list (or a JSON string of one, as TRL's json.loads of a
// string column), kwargs an object whose entries become template variables.
absl::Status ApplyExtras(const ChatExtras& extras, text::ChatTemplateOptions* options) {
  if (!extras.tools_json.empty()) {
    Json tools = Json::parse(extras.tools_json, nullptr, /*allow_exceptions=*/false);
    if (tools.is_string()) tools = Json::parse(tools.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (!tools.is_array() && !tools.is_null()) {
      return absl::InvalidArgumentError(
          "tools: expected a list of function schemas (or a JSON string of one)");
    }
    options->tools = std::move(tools);
  }
  if (!extras.kwargs_json.empty()) {
    Json kwargs = Json::parse(extras.kwargs_json, nullptr, /*allow_exceptions=*/false);
    if (kwargs.is_null()) return absl::OkStatus();
    if (!kwargs.is_object()) return absl::InvalidArgumentError("chat_template_kwargs: expected an object");
    options->extra = std::move(kwargs);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::Load(const std::string& dir,
                                                               const TokenizerOverrides& overrides) {
  std::unique_ptr<HfTokenizer> out(new HfTokenizer());
  out->dir_ = dir;
  auto tok = text::TokenizerJson::FromFile(dir + "/tokenizer.json");
  if (!tok.ok()) return tok.status();
  out->tok_ = std::move(*tok);
  out->vocab_size_ = out->tok_->vocab_size();

  const std::string config_path = dir + "/tokenizer_config.json";
  auto config = ReadOptionalJson(config_path);
  if (!config.ok()) return config.status();
  auto model_config = ReadOptionalJson(dir + "/config.json");
  if (!model_config.ok()) return model_config.status();

  auto resolve = [&](const char* token_key, const char* id_key) -> absl::StatusOr<int32_t> {
    if (*config && (*config)->is_object()) {
      if (auto text = TokenText(**config, token_key)) {
        auto id = out->tok_->TokenToId(*text);
        if (!id) {
          return absl::InvalidArgumentError(absl::StrCat(config_path, ": ", token_key, " \"", *text,
                                                         "\" is not in tokenizer.json's vocabulary"));
        }
        return *id;
      }
    }
    return ConfigId(*model_config, id_key);
  };
  auto bos = resolve("bos_token", "bos_token_id");
  if (!bos.ok()) return bos.status();
  auto eos = resolve("eos_token", "eos_token_id");
  if (!eos.ok()) return eos.status();
  if (!overrides.eos_token.empty()) {  // TRL: tokenizer.eos_token_id = convert_tokens_to_ids(eos_token)
    std::optional<int32_t> id = out->tok_->TokenToId(overrides.eos_token);
    if (!id) {
      return absl::InvalidArgumentError(absl::StrCat(
          "eos_token \"", overrides.eos_token, "\" is not a token of ", dir, "/tokenizer.json's vocabulary"));
    }
    eos = *id;
    out->eos_token_ = overrides.eos_token;
  }
  auto pad = resolve("pad_token", "pad_token_id");
  if (!pad.ok()) return pad.status();
  out->bos_id_ = *bos;
  out->eos_id_ = *eos;
  out->configured_pad_id_ = *pad;
  out->pad_id_ = *pad >= 0 ? *pad : *eos;
  if (*config && (*config)->is_object()) {
    auto it = (*config)->find("add_bos_token");
    if (it != (*config)->end() && it->is_boolean()) out->add_bos_token_ = it->get<bool>();
  }
  // A missing template, or one our Jinja subset refuses, must not stop text-only data: the error waits for
  // RenderChat.
  if (!overrides.chat_template.empty()) {  // asked for by name: it must load
    ZF_ASSIGN_OR_RETURN(text::ChatTemplate replacement,
                        text::ChatTemplate::FromTemplatePath(overrides.chat_template, dir));
    out->chat_ = std::move(replacement);
    return out;
  }
  auto chat = text::ChatTemplate::FromDirectory(dir);
  if (chat.ok()) {
    out->chat_ = std::move(*chat);
  } else {
    out->chat_error_ = chat.status();
  }
  return out;
}

bool HfTokenizer::template_writes_bos() const {
  if (!chat_) return false;
  auto source = chat_->Source(text::ChatTemplateOptions{});
  return source.ok() && source->find("bos_token") != std::string::npos;
}

DataExpectations HfTokenizer::expectations() const {
  DataExpectations e;
  e.bos_id = bos_id_;
  e.eos_id = eos_id_;
  e.configured_pad_id = configured_pad_id_;
  e.expects_bos = bos_id_ >= 0 && (template_writes_bos() || add_bos_token_.value_or(false));
  return e;
}

absl::StatusOr<std::vector<int32_t>> HfTokenizer::Encode(const std::string& text) const {
  return tok_->Encode(text, /*add_special_tokens=*/false);
}

absl::StatusOr<std::string> HfTokenizer::Decode(const std::vector<int32_t>& ids) const {
  return tok_->Decode(ids, /*skip_special_tokens=*/true);
}

absl::StatusOr<std::string> HfTokenizer::RenderChat(const std::string& messages_json,
                                                    bool add_generation_prompt,
                                                    const ChatExtras& extras) const {
  if (absl::IsNotFound(chat_error_)) {
    return absl::FailedPreconditionError(
        absl::StrCat(chat_error_.message(), ": conversational data needs one"));
  }
  if (!chat_error_.ok()) return chat_error_;
  Json messages;
  try {
    messages = Json::parse(messages_json);
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("messages: invalid JSON: ", e.what()));
  }
  text::ChatTemplateOptions options;
  options.add_generation_prompt = add_generation_prompt;
  options.eos_token = eos_token_;
  ZF_RETURN_IF_ERROR(ApplyExtras(extras, &options));
  return chat_->Render(messages, options);
}

}  // namespace zerofit::data
