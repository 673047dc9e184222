// Normalizers: the first stage of encoding, applied to each piece of input text that is not an added
// token (Hugging Face `normalizers`). Offsets are not tracked: zerofit only needs ids. Implementations are
// immutable and thread-safe.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "text/json_view.h"

namespace zerofit::text {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // Rewrites `text` (valid UTF-8) in place.
  virtual absl::Status Normalize(std::string* text) const = 0;
};

// Builds the normalizer described by `json` (the tokenizer.json "normalizer" object). Supported types:
// Sequence, NFC, NFD, NFKC, NFKD, Prepend, Replace (String or Regex pattern), Lowercase, Strip. Anything
// else is an error naming the JSON path.
absl::StatusOr<std::unique_ptr<Normalizer>> NormalizerFromJson(const JsonView& json);

}  // namespace zerofit::text
