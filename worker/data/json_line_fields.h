// The fields of one JSONL line of training data, read with errors that name the file, the 1-based line and
// the field ("data/train.jsonl:17: field 'chosen': expected a string, got number"): strings, token-id lists
// checked against the vocabulary, text encoded with the tokenizer, and chat messages checked and rendered
// with its template. Shared by the readers of preference pairs (preference_dataset.cc) and SFT examples
// (sft_example.cc); internal to zerofit_data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "worker/data/tokenizer.h"

namespace zerofit::data::json_line {

// Ordered: conversational messages reach the chat template with their keys in file order (tojson prints it).
using Json = nlohmann::ordered_json;

// Where a line came from, for error messages "source:line: ...".
struct Where {
  const std::string& source;
  size_t line;
};

absl::Status LineError(const Where& w, const std::string& message);
absl::Status FieldError(const Where& w, const char* field, const std::string& message);

// The special ids and vocabulary every line is checked and assembled against.
struct Specials {
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t vocab_size = 0;  // 0: unknown
};

// obj[field] as a string; missing or another type is an error naming the field.
absl::StatusOr<std::string> GetString(const Json& obj, const char* field, const Where& w);

// obj[field] as token ids in [0, sp.vocab_size) (below 2^31 when the vocabulary is unknown).
absl::StatusOr<std::vector<int32_t>> GetIds(const Json& obj, const char* field, const Specials& sp,
                                            const Where& w);

// obj[field], a string, encoded with `tok` (no specials); without a tokenizer the error says to write
// `ids_hint` (e.g. "prompt_ids/chosen_ids/rejected_ids") instead.
absl::StatusOr<std::vector<int32_t>> EncodeField(const Json& obj, const char* field, const Tokenizer* tok,
                                                 const Where& w, const char* ids_hint);

// Checks a list of chat messages: each an object with a string "role".
absl::Status CheckMessages(const Json& msgs, const char* field, const Where& w);

// `msgs` rendered with the tokenizer's chat template; its errors name `field`.
absl::StatusOr<std::string> Render(const Json& msgs, bool add_generation_prompt, const char* field,
                                   const Tokenizer* tok, const Where& w);

// The text of `response` after `prompt` as the chat template writes it: render(prompt + response) minus
// render(prompt, add_generation_prompt=true) (`prompt_text`), as TRL's apply_chat_template does. An error
// names `field` when the rendering does not start with the prompt's, or when nothing is left.
absl::StatusOr<std::string> RenderResponse(const Json& prompt, const std::string& prompt_text,
                                           const Json& response, const char* field, const Tokenizer* tok,
                                           const Where& w);

}  // namespace zerofit::data::json_line
