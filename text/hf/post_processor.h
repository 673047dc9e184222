// Post-processors: add special tokens around an encoded sequence (HF `processors`). Only single sequences
// are encoded by zerofit, so only TemplateProcessing's "single" template is used. Immutable, thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "text/json_view.h"

namespace zerofit::text {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // Rewrites `ids` for add_special_tokens=true (callers skip the call when it is false).
  virtual void Process(std::vector<int32_t>* ids) const = 0;
};

// Builds the post-processor described by `json` ("post_processor"). Supported: TemplateProcessing,
// ByteLevel (ids unchanged: it only trims offsets), RobertaProcessing, BertProcessing, Sequence.
absl::StatusOr<std::unique_ptr<PostProcessor>> PostProcessorFromJson(const JsonView& json);

}  // namespace zerofit::text
