#include "text/hf/batch_encode.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace zerofit::text {

absl::StatusOr<std::vector<std::vector<int32_t>>> EncodeBatch(const TokenizerJson& tokenizer,
                                                              absl::Span<const std::string_view> texts,
                                                              bool add_special_tokens,
                                                              core::ThreadPool& pool) {
  std::vector<std::vector<int32_t>> ids(texts.size());
  std::vector<absl::Status> errors(texts.size());  // one slot per text: no shared mutable state
  pool.ParallelFor(texts.size(), [&](size_t i) {
    absl::StatusOr<std::vector<int32_t>> one = tokenizer.Encode(texts[i], add_special_tokens);
    if (one.ok()) {
      ids[i] = *std::move(one);
    } else {
      errors[i] = one.status();
    }
  });
  for (size_t i = 0; i < errors.size(); ++i) {
    if (!errors[i].ok()) {
      return absl::Status(errors[i].code(), absl::StrCat("text ", i, ": ", errors[i].message()));
    }
  }
  return ids;
}

}  // namespace zerofit::text
