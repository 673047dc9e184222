#include "launch/hostlist.h"

#include <cstdint>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/excerpt.h"
#include "core/status_macros.h"

namespace zerofit::launch {
namespace {

constexpr size_t kMaxHosts = 1 << 20;

absl::Status Bad(const std::string& list, size_t pos, const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat("host list '", core::Excerpt(list), "' at position ", pos, ": ", why));
}

// One bracket body ("01-03,07") -> its items as strings with their padding.
absl::StatusOr<std::vector<std::string>> ExpandRanges(const std::string& list, size_t at,
                                                      const std::string& body) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= body.size()) {
    size_t end = body.find(',', start);
    if (end == std::string::npos) end = body.size();
    const std::string item = body.substr(start, end - start);
    if (item.empty()) return Bad(list, at + start, "empty range");
    const size_t dash = item.find('-');
    const std::string lo_s = item.substr(0, dash);
    const std::string hi_s = dash == std::string::npos ? lo_s : item.substr(dash + 1);
    uint64_t lo = 0, hi = 0;
    if (lo_s.empty() || hi_s.empty() || lo_s.find_first_not_of("0123456789") != std::string::npos ||
        hi_s.find_first_not_of("0123456789") != std::string::npos || !absl::SimpleAtoi(lo_s, &lo) ||
        !absl::SimpleAtoi(hi_s, &hi)) {
      return Bad(list, at + start,
                 absl::StrCat("'", core::Excerpt(item), "' is not a number or a range a-b"));
    }
    if (hi < lo)
      return Bad(list, at + start, absl::StrCat("range '", core::Excerpt(item), "' runs backwards"));
    if (hi - lo >= kMaxHosts) return Bad(list, at + start, "range too large");
    const int width = static_cast<int>(lo_s.size());
    for (uint64_t v = lo; v <= hi; ++v) out.push_back(absl::StrFormat("%0*d", width, v));
    start = end + 1;
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExpandHostlist(const std::string& list) {
  std::vector<std::string> hosts;
  size_t i = 0;
  if (list.empty()) return Bad(list, 0, "empty");
  while (i < list.size()) {
    // One comma-separated element, whose brackets may contain commas.
    std::vector<std::string> names = {""};
    const size_t element_start = i;
    while (i < list.size() && list[i] != ',') {
      if (list[i] == '[') {
        const size_t close = list.find(']', i);
        if (close == std::string::npos) return Bad(list, i, "unclosed '['");
        ZF_ASSIGN_OR_RETURN(std::vector<std::string> items,
                            ExpandRanges(list, i + 1, list.substr(i + 1, close - i - 1)));
        std::vector<std::string> next;
        for (const std::string& n : names)
          for (const std::string& it : items) next.push_back(n + it);
        if (next.size() > kMaxHosts) return Bad(list, i, "too many hosts");
        names = std::move(next);
        i = close + 1;
      } else if (list[i] == ']') {
        return Bad(list, i, "']' without '['");
      } else {
        for (std::string& n : names) n += list[i];
        ++i;
      }
    }
    if (i == element_start) return Bad(list, i, "empty host name");
    hosts.insert(hosts.end(), names.begin(), names.end());
    if (i < list.size()) {
      ++i;  // the comma
      if (i == list.size()) return Bad(list, i, "trailing ','");
    }
  }
  return hosts;
}

}  // namespace zerofit::launch
