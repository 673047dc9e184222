// Decoders: turn the token strings of a sequence of ids back into text (HF `decoders`, `decode_chain`
// semantics: each decoder maps the list of token strings to a new list; the result is their
// concatenation). Immutable, thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "text/json_view.h"

namespace zerofit::text {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void DecodeChain(std::vector<std::string>* tokens) const = 0;
};

// Builds the decoder described by `json` ("decoder"). Supported: Sequence, ByteLevel, Replace (String
// pattern), ByteFallback, Fuse, Strip, Metaspace.
absl::StatusOr<std::unique_ptr<Decoder>> DecoderFromJson(const JsonView& json);

}  // namespace zerofit::text
