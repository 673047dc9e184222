#include "text/hf/split_behavior.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/excerpt.h"
#include "text/string_view_compat.h"

namespace zerofit::text {

absl::StatusOr<SplitBehavior> ParseSplitBehavior(std::string_view name) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  return absl::InvalidArgumentError(absl::StrCat("unsupported \"", core::Excerpt(name), "\""));
}

std::vector<MatchSpan> CoverWithGaps(const std::vector<std::pair<size_t, size_t>>& matches, size_t size) {
  std::vector<MatchSpan> spans;
  spans.reserve(matches.size() * 2 + 1);
  size_t prev = 0;
  for (const auto& [b, e] : matches) {
    if (b > prev) spans.push_back({prev, b, false});
    spans.push_back({b, e, true});
    prev = e;
  }
  if (prev < size) spans.push_back({prev, size, false});
  return spans;
}

// Mirrors HF's NormalizedString::split: builds (begin, end) pieces, then drops empty ones.
void SplitBySpans(std::string_view text, const std::vector<MatchSpan>& spans, SplitBehavior behavior,
                  std::vector<SplitPiece>* out) {
  std::vector<std::pair<size_t, size_t>> pieces;
  pieces.reserve(spans.size());
  bool previous_match = false;
  bool merge_next = false;
  for (const MatchSpan& s : spans) {
    switch (behavior) {
      case SplitBehavior::kIsolated:
        pieces.emplace_back(s.begin, s.end);
        break;
      case SplitBehavior::kRemoved:
        if (!s.is_match) pieces.emplace_back(s.begin, s.end);
        break;
      case SplitBehavior::kContiguous:
        if (s.is_match && previous_match && !pieces.empty()) {
          pieces.back().second = s.end;
        } else {
          pieces.emplace_back(s.begin, s.end);
        }
        break;
      case SplitBehavior::kMergedWithPrevious:
        if (s.is_match && !previous_match && !pieces.empty()) {
          pieces.back().second = s.end;
        } else {
          pieces.emplace_back(s.begin, s.end);
        }
        break;
      case SplitBehavior::kMergedWithNext:
        if (merge_next && !s.is_match && !pieces.empty()) {  // a match joins a following non-match
          pieces.back().second = s.end;
        } else {
          pieces.emplace_back(s.begin, s.end);
        }
        merge_next = s.is_match;
        break;
    }
    previous_match = s.is_match;
  }
  for (const auto& [b, e] : pieces) {
    if (e > b) out->push_back({std::string(text.substr(b, e - b)), b});
  }
}

}  // namespace zerofit::text
