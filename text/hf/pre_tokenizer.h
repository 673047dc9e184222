// Pre-tokenizers: split normalized text into the pieces ("words") the model tokenizes independently
// (Hugging Face `pre_tokenizers`). Implementations are immutable and thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "text/json_view.h"

namespace zerofit::text {

struct PreToken {
  std::string text;
  // True when the piece begins at byte 0 of the original input (HF's `offsets_original().0 == 0`), which
  // Metaspace's prepend_scheme "first" needs.
  bool at_input_start = false;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` with their split (and possibly rewritten) sub-pieces, in order; empty pieces are
  // dropped. Every piece's text is valid UTF-8 before and after.
  virtual absl::Status PreTokenize(std::vector<PreToken>* pieces) const = 0;
};

// Builds the pre-tokenizer described by `json` ("pre_tokenizer"). Supported: Sequence, Split (String or
// Regex pattern, every behaviour, invert), ByteLevel, Metaspace, Digits, WhitespaceSplit.
absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizerFromJson(const JsonView& json);

}  // namespace zerofit::text
