// GRPO's prompts (issue 32): a JSONL file of problems, each line one prompt and the answer a verifiable
// reward checks completions against. Three forms of a line (one form per line; forms may be mixed):
//   {"prompt": "What is 12+7?", "answer": "19"}                       text, tokenized with the tokenizer
//   {"messages": [{"role": "user", "content": "..."}], "answer": "19"}  chat, rendered with the tokenizer's
//                                                   chat template and the generation prompt, then tokenized
//   {"prompt": [{"role": "user", "content": "..."}], "answer": "19"}    the same chat (TRL's form)
//   {"prompt_ids": [5, 9, 3], "answer": "19", "answer_ids": [7, 4]}  pre-tokenized (no tokenizer needed)
// `answer` (a string or a number) is optional: a job rewarded by a reward model alone needs none.
// `answer_ids` is what the exact rule compares token for token when no tokenizer can decode completions.
// BOS: added to text and id prompts when add_bos (BOS id known); a chat template writes its own. A prompt
// longer than max_prompt_length keeps its last tokens (and its BOS) and is counted as truncated.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/data/tokenizer.h"

namespace zerofit::data {

struct Prompt {
  std::vector<int32_t> ids;  // [BOS] + prompt tokens, after left truncation
  std::optional<std::string> answer;
  std::vector<int32_t> answer_ids;  // empty unless the line gave answer_ids
  size_t source_line = 0;           // 1-based
  // A chat prompt's messages as the line wrote them (a JSON list) and its tools/chat_template_kwargs; empty
  // for text and pre-tokenized prompts. A reward model reads a completion of it as the chat template writes
  // the assistant's reply (chat_response.h), the form it was trained on.
  std::string messages_json;
  ChatExtras chat_extras;
};

struct PromptDataOptions {
  int64_t max_prompt_length = 0;  // 0: no limit
  bool add_bos = true;
  int32_t bos_id = -1;  // without a tokenizer: the special ids and vocabulary size (0: unchecked)
  int32_t vocab_size = 0;
};

struct PromptData {
  std::vector<Prompt> prompts;
  size_t truncated = 0;
  size_t longest_prompt = 0;  // tokens, after truncation
};

// Reads `path`. `tok` may be null when every line is pre-tokenized. Errors name the file, line and field
// ("prompts.jsonl:7: field 'answer': expected a string or a number, got array"); an empty file is an error.
absl::StatusOr<PromptData> LoadPrompts(const std::string& path, const Tokenizer* tok,
                                       const PromptDataOptions& options);

}  // namespace zerofit::data
