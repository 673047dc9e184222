// How a pre-tokenizer turns pattern matches into pieces (HF `SplitDelimiterBehavior`).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace zerofit::text {

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Parses "Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous".
absl::StatusOr<SplitBehavior> ParseSplitBehavior(std::string_view name);

// Span of `text` with whether it matched the pattern.
struct MatchSpan {
  size_t begin;
  size_t end;
  bool is_match;
};

// Spans covering all of a text of `size` bytes: the `matches` (sorted, non-overlapping) and the gaps.
std::vector<MatchSpan> CoverWithGaps(const std::vector<std::pair<size_t, size_t>>& matches, size_t size);

// One piece of a split and the byte offset where it starts in the split text.
struct SplitPiece {
  std::string text;
  size_t begin;
};

// Appends the pieces `behavior` makes of `text` given `spans` (from CoverWithGaps, possibly inverted);
// empty pieces are dropped.
void SplitBySpans(std::string_view text, const std::vector<MatchSpan>& spans, SplitBehavior behavior,
                  std::vector<SplitPiece>* out);

}  // namespace zerofit::text
