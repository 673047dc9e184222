// A compiled PCRE2 regular expression (UTF + UCP mode, JIT-compiled when available) used by the Split
// pre-tokenizer and the ByteLevel pre-tokenizer's GPT-2 pattern. RAII owner of the pcre2 code; immutable
// after construction, so one Regex may be used from many threads (each call makes its own match data).
#pragma once

#include <memory>
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

  const std::string& pattern() const { return pattern_; }

 private:
  Regex(std::string pattern, void* code) : pattern_(std::move(pattern)), code_(code) {}

  std::string pattern_;
  void* code_;  // pcre2_code_8*, owned
};

// Rewrites Oniguruma's \s / \S into explicit classes (exposed for tests).
std::string TranslateOnigurumaPattern(std::string_view pattern);

}  // namespace zerofit::text
