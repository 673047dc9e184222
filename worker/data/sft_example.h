// SFT examples (task sft): a prompt and the completion the loss scores, one per JSONL line, in the dataset
// formats TRL's SFTTrainer reads:
//   language modeling:  {"text": "The cat sat."}                      the whole text is scored (no prompt)
//   prompt-completion:  {"prompt": "12+7=", "completion": "19"}       only the completion is scored
//   conversational:     {"messages": [{"role": ..., "content": ...}, ...]}
//                           the whole conversation, rendered with the chat template, is scored
//                       {"prompt": [messages], "completion": [messages]}
//                           the completion's part of the rendering only (as for conversational pairs)
//   pre-tokenized:      {"prompt_ids": [5, 9], "completion_ids": [4, 10]}   (prompt_ids may be left out)
// As in TRL, only a prompt-completion line keeps its prompt out of the loss, and with assistant_only_loss
// only the assistant's messages of a conversational line are scored (chat_turns.h). A preference pair's line
// (preference_dataset.h) is an SFT example too: its chosen response is the completion, and its rejected
// response is read (and checked) but not kept. Ids carry no BOS/EOS; the reader adds them as for pairs.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/data/json_line_fields.h"
#include "worker/data/tokenizer.h"

namespace zerofit::data {

// Raw token ids of an example, without specials.
struct SftIds {
  std::vector<int32_t> prompt;      // not scored
  std::vector<int32_t> completion;  // non-empty
  // assistant_only_loss: 1 for each completion token the loss scores, 0 for the others (a user's message
  // between two of the assistant's); the first is 1. Empty when every completion token is scored.
  std::vector<uint8_t> scored;
};

// Which tokens of an example the loss scores (TRL's SFTConfig names; PreferenceDataOptions).
struct SftScoring {
  bool completion_only_loss = true;  // a prompt-completion line's prompt is not scored
  bool assistant_only_loss = false;  // only the assistant's messages (conversational lines only)
};

// Whether `obj` is a preference pair's line (it has chosen/rejected text, messages or ids).
bool IsPreferencePairLine(const json_line::Json& obj);

// Whether `obj` has a field only SFT examples have (text, completion, messages, completion_ids): what a
// reward-model or DPO reader names when such a line reaches it.
bool IsSftExampleLine(const json_line::Json& obj);

// One SFT example line in the formats above (not a pair's: see IsPreferencePairLine). `tok` may be null
// for pre-tokenized lines. Errors name the source, line and field, and list the formats when none matches;
// with assistant_only_loss, a line that is not conversational or has no assistant message is an error.
// completion_only_loss false is applied here to conversational lines with assistant_only_loss (their prompt's
// assistant messages are scored); the caller applies it to the others (their whole prompt is scored).
absl::StatusOr<SftIds> ParseSftExample(const json_line::Json& obj, const Tokenizer* tok,
                                       const json_line::Specials& sp, const SftScoring& scoring,
                                       const json_line::Where& w);

}  // namespace zerofit::data
