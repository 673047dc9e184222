// Encodes many texts on all cores of a core::ThreadPool (the pool's threads plus the caller).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/thread_pool.h"
#include "text/hf/tokenizer_json.h"

namespace zerofit::text {

// ids[i] = tokenizer.Encode(texts[i], add_special_tokens). Fails with the first failing text's error
// (prefixed with its index). `texts` views must stay valid for the call.
absl::StatusOr<std::vector<std::vector<int32_t>>> EncodeBatch(const TokenizerJson& tokenizer,
                                                              absl::Span<const std::string_view> texts,
                                                              bool add_special_tokens,
                                                              core::ThreadPool& pool);

}  // namespace zerofit::text
