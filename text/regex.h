// A compiled PCRE2 regular expression (UTF + UCP mode, JIT-compiled when available) used by the Split
// pre-tokenizer and the ByteLevel pre-tokenizer's GPT-2 pattern (FindAll), and by the verifiable reward's
// regex rule (FindLast, capture groups). RAII owner of the pcre2 code; immutable after construction, so one
// Regex may be used from many threads (each call makes its own match data).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace zerofit::text {

class Regex {
 public:
  // Compiles `pattern` written in the Oniguruma dialect that Hugging Face tokenizers uses; `\s` and `\S`
  // are rewritten to Oniguruma's Unicode White_Space set (PCRE2's differs on U+0085).
  static absl::StatusOr<std::unique_ptr<Regex>> Compile(std::string_view pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Per-call scratch space (pcre2 match data): one per thread, reused across FindAll calls.
  class Scratch {
   public:
    explicit Scratch(const Regex& regex);
    ~Scratch();
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;

   private:
    friend class Regex;
    void* data_;  // pcre2_match_data_8*, owned
  };

  // Byte spans [begin, end) of the successive non-overlapping matches in `subject` (valid UTF-8), left to
  // right. An empty match advances the search by one code point and is not reported (HF drops empty
  // pieces). `scratch` must have been made for this regex.
  absl::Status FindAll(std::string_view subject, Scratch& scratch,
                       std::vector<std::pair<size_t, size_t>>* spans) const;
  // Convenience form that allocates its own scratch.
  absl::Status FindAll(std::string_view subject, std::vector<std::pair<size_t, size_t>>* spans) const;

  // A byte span [begin, end) of the subject.
  using Span = std::pair<size_t, size_t>;
  // One match: [0] the whole match, [g] capture group g (1..GroupCount()); nullopt for a group that took no
  // part in the match ("(a)|b" on "b": group 1).
  using Groups = std::vector<std::optional<Span>>;

  // The number of capture groups, named ones included; the whole match (group 0) is not counted.
  int GroupCount() const;
  // The number of the group named `name` ("(?<name>...)"). NotFound when no group has that name,
  // InvalidArgument when several do ("(?J)" allows duplicates).
  absl::StatusOr<int> GroupNumber(std::string_view name) const;
  // The group a caller reads, as a user writes it: a number (0 is the whole match) or a name; empty means 1.
  // InvalidArgument naming the group when the pattern has no such group.
  absl::StatusOr<int> GroupOf(std::string_view group) const;

  // The groups of the LAST of the successive non-overlapping matches in `subject`, found left to right;
  // nullopt when there is no match. Unlike FindAll, empty matches count: after one, the search resumes at
  // the same position but refuses an empty match there (Perl's and Python's rule: "a*" on "baa" matches
  // "", "aa", ""). InvalidArgument when `subject` is not valid UTF-8 (checked here: this takes any text);
  // Internal when PCRE2 gives up (its match or depth limit, a pattern that backtracks catastrophically).
  absl::StatusOr<std::optional<Groups>> FindLast(std::string_view subject) const;
  // Whether the pattern matches the whole of `subject`, as Python's re.fullmatch: anchored at both ends
  // (PCRE2_ANCHORED | PCRE2_ENDANCHORED, so alternatives backtrack until one ends at the end). Errors as
  // FindLast's.
  absl::StatusOr<bool> FullMatch(std::string_view subject) const;

  const std::string& pattern() const { return pattern_; }

 private:
  Regex(std::string pattern, void* code) : pattern_(std::move(pattern)), code_(code) {}

  std::string pattern_;
  void* code_;  // pcre2_code_8*, owned
};

// The longest pattern a job spec's reward rule may give (errors quote the pattern: a bound keeps them
// readable); the spec refuses longer ones at submit, the reward when it is built.
inline constexpr size_t kMaxRulePatternBytes = 4096;

// Rewrites Oniguruma's \s / \S into explicit classes (exposed for tests).
std::string TranslateOnigurumaPattern(std::string_view pattern);

}  // namespace zerofit::text
