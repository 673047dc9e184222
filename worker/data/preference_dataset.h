// Preference pairs (prompt, chosen response, rejected response) read from JSONL, tokenized and truncated,
// ready for MakePairBatch (pair_batch.h). Used by reward-model (Bradley-Terry) and DPO training, and (with
// PreferenceDataOptions::sft) for SFT examples: a prompt and one response, the pair's chosen, with no
// rejected response (the formats of sft_example.h, and pair lines whose rejected response is dropped).
//
// File format: one JSON object per line; blank lines are skipped; keys other than the ones below are ignored.
//   text:          {"prompt": "12+7=", "chosen": "19", "rejected": "18"}          (needs a Tokenizer)
//   pre-tokenized: {"prompt_ids": [5, 9], "chosen_ids": [4, 10], "rejected_ids": [4, 12]}
//   conversational: {"prompt": [messages], "chosen": [messages], "rejected": [messages]}
//                   {"chosen": [messages], "rejected": [messages]}   (the shared leading messages = prompt)
//                   (needs a Tokenizer with a chat template: HfTokenizer, hf_tokenizer.h)
// A line is pre-tokenized when it has any "*_ids" key, conversational when "chosen" is a list; the kinds may
// be mixed in one file. Ids carry no BOS/EOS: the options below add them. `prompt` may be empty; `chosen`
// and `rejected` may not. A pair's line may carry "margin", a finite number (PreferencePair::margin).
//
// Conversational lines are rendered with the model's chat template as TRL's apply_chat_template does: the
// prompt text is render(prompt, add_generation_prompt=true), each response text is
// render(prompt + response) minus that prefix (an error when it is not a prefix); prompt and responses are
// then tokenized separately, so the prompt tokens stay the prompt part (DPO excludes them from log-probs).
// Templates that write BOS themselves (Llama's "{{ bos_token }}") want add_bos=false; EOS is appended as
// for text pairs (TRL does the same).
//
// An empty file, a file of blank lines only, and a last line cut off without its newline are errors too.
//
// Every error names the file, the 1-based line and the field, e.g.
//   data/train.jsonl:17: field 'chosen': expected a string
//
// Sequence layout and truncation (also in docs/data.md). Each response forms one sequence
//   [BOS] prompt response [EOS]
// BOS (when add_bos) belongs to the prompt part, EOS (when add_eos) to the response part; every length below
// counts them. When max_length > 0 and the longer of the two sequences exceeds max_length:
//   1. the prompt part is truncated from the LEFT to at most max_prompt_length tokens: its end, nearest the
//      response, is kept, and so is BOS (models expect it at position 0); the prompt stays shared by both;
//   2. then each response part is truncated from the RIGHT, independently, to max_length - prompt part.
//      A response cut this way loses its EOS too: it did not end there, and training must not teach the
//      model that it did.
// The stored pair therefore holds prompt = [BOS] + prompt tokens and chosen/rejected = response tokens
// (+ [EOS] unless cut); sequence = prompt ++ response, and the response starts at index prompt.size().
// As in TRL, EOS is not appended to a response that already ends with it (a text written with its eos
// token), nor to a chat template's rendering (PreferencePair::chat_rendered), which ends as the template
// writes it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/data/tokenizer.h"

namespace zerofit::data {

struct PreferencePair {
  std::vector<int32_t> prompt;    // [BOS] + prompt tokens, after left truncation
  std::vector<int32_t> chosen;    // response tokens + [EOS], after right truncation
  std::vector<int32_t> rejected;  // same rules as chosen, truncated independently; empty: an SFT example
  size_t source_line = 0;         // 1-based line of the JSONL file (for error messages and debugging)
  // Reward models: how far the chosen score must exceed the rejected one (the line's optional "margin", TRL's
  // margin column: Llama 2's loss -log sigmoid(r_chosen - r_rejected - margin)); 0 without one.
  double margin = 0;
  // SFT with assistant_only_loss: 1 for each chosen token the loss scores, 0 for the others (a user's turn
  // between two of the assistant's), as long as `chosen`. Empty when the whole response is scored.
  std::vector<uint8_t> chosen_scored{};
  // The responses are chat-template renderings (conversational lines): they end as the template writes them,
  // and no EOS was appended whatever add_eos says (TRL appends none to conversational data either).
  bool chat_rendered = false;
};

struct PreferenceDataOptions {
  // Longest sequence in tokens (BOS and EOS included); 0 means no limit.
  int64_t max_length = 512;
  // Longest prompt part (BOS included) when a pair must be truncated. Must be < max_length so at least one
  // response token survives, and >= 1 when add_bos (BOS is never dropped).
  int64_t max_prompt_length = 256;
  bool add_bos = true;
  bool add_eos = true;
  // For files read without a tokenizer (pre-tokenized ids): the special ids and the vocabulary size
  // (0: unknown, then only negative ids are rejected). With a tokenizer its own values are used; these may
  // stay unset (-1, -1, 0) or repeat them, and any other value is an InvalidArgument error.
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t vocab_size = 0;
  // Task sft: lines are SFT examples (sft_example.h) or pairs whose rejected response is dropped; every
  // PreferencePair read has an empty `rejected`, and truncation looks at the chosen response alone.
  bool sft = false;
  // sft: false scores the prompt too (TRL's SFTConfig.completion_only_loss): an example's prompt tokens then
  // begin its completion, and its prompt part holds BOS alone.
  bool completion_only_loss = true;
  // sft: true scores only the assistant's messages of conversational lines (TRL's
  // SFTConfig.assistant_only_loss; the turns are found as chat_turns.h says); every line must then be one.
  bool assistant_only_loss = false;
  // Lines parsed and tokenized in parallel (0: all cores). Results, stats and the first error (the lowest
  // bad line's) are the same for every count; the file is read in chunks of a few thousand lines.
  int threads = 0;
};

// What truncation did to a file, for a progress line ("12 of 5000 pairs truncated").
struct PreferenceDataStats {
  size_t pairs = 0;
  size_t prompts_truncated = 0;
  size_t responses_truncated = 0;  // chosen and rejected counted separately
  size_t longest_sequence = 0;     // after truncation
};

// Checks the options against each other and against the tokenizer (nullptr: none). Errors say what to change.
absl::Status ValidatePreferenceDataOptions(const PreferenceDataOptions& options, const Tokenizer* tok);

// Applies the layout and truncation rules above to raw token ids (no specials). Preconditions: options
// validated; chosen non-empty; bos_id/eos_id valid when add_bos/add_eos. An empty `rejected` (an SFT
// example) stays empty and takes no part in the truncation. `chosen_scored` (SftIds::scored: empty, or one
// flag per chosen token) is truncated with the response; an appended EOS is scored as the token before it.
PreferencePair AssemblePreferencePair(const std::vector<int32_t>& prompt, const std::vector<int32_t>& chosen,
                                      const std::vector<int32_t>& rejected, int32_t bos_id, int32_t eos_id,
                                      const PreferenceDataOptions& options, size_t source_line,
                                      const std::vector<uint8_t>& chosen_scored = {});

// The tokens of an SFT example (no rejected response) its loss scores: its completion's flagged ones
// (chosen_scored), or all of them; never the sequence's position 0, which nothing predicts (the completion's
// first token when the prompt is empty).
size_t ScoredTokens(const PreferencePair& example);

// Parses JSONL `contents`; `source` names it in errors (usually the path). `tok` may be nullptr when every
// line is pre-tokenized. A file without any pair is an error. `stats` (optional) receives truncation counts.
absl::StatusOr<std::vector<PreferencePair>> ParsePreferenceJsonl(const std::string& contents,
                                                                 const std::string& source,
                                                                 const Tokenizer* tok,
                                                                 const PreferenceDataOptions& options,
                                                                 PreferenceDataStats* stats = nullptr);

// Reads `path` and parses it as above.
absl::StatusOr<std::vector<PreferencePair>> LoadPreferenceJsonl(const std::string& path, const Tokenizer* tok,
                                                                const PreferenceDataOptions& options,
                                                                PreferenceDataStats* stats = nullptr);

}  // namespace zerofit::data
