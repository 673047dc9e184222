#include "text/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "text/string_view_compat.h"
#include "text/unicode.h"

namespace zerofit::text {
namespace {

// Oniguruma's \s in UTF-8 mode is the White_Space property; PCRE2 (UCP) lacks U+0085 there.
constexpr std::string_view kWhiteSpaceItems =
    "\\t\\n\\x0B\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}"
    "\\x{205F}\\x{3000}";

pcre2_code* AsCode(void* code) { return static_cast<pcre2_code*>(code); }

std::string PcreError(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

// The translation of `pattern`; when `source` is given, (*source)[j] is the byte of `pattern` that byte j of
// the translation came from (a rewritten \s maps to its backslash), so PCRE2's error offsets, which count
// in the translation, can be reported in the pattern as written.
std::string Translate(std::string_view pattern, std::vector<size_t>* source) {
  std::string out;
  auto emit = [&](std::string_view piece, size_t from) {
    out.append(piece.data(), piece.size());
    if (source != nullptr) source->insert(source->end(), piece.size(), from);
  };
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[i + 1];
      if (e == 's') {
        emit(in_class ? std::string(kWhiteSpaceItems) : absl::StrCat("[", AsAbsl(kWhiteSpaceItems), "]"), i);
      } else if (e == 'S' && !in_class) {
        emit(absl::StrCat("[^", AsAbsl(kWhiteSpaceItems), "]"), i);
      } else {
        emit(pattern.substr(i, 2), i);
      }
      ++i;
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      emit(pattern.substr(i, 1), i);
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') {
        ++i;
        emit(pattern.substr(i, 1), i);
      }
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') {  // a literal ] first
        ++i;
        emit(pattern.substr(i, 1), i);
      }
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    emit(pattern.substr(i, 1), i);
  }
  return out;
}

}  // namespace

std::string TranslateOnigurumaPattern(std::string_view pattern) { return Translate(pattern, nullptr); }

absl::StatusOr<std::unique_ptr<Regex>> Regex::Compile(std::string_view pattern) {
  std::vector<size_t> source;
  const std::string translated = Translate(pattern, &source);
  int error = 0;
  PCRE2_SIZE offset = 0;
  // The pattern comes from a file (tokenizer.json, a job spec): PCRE2 checks that it is UTF-8.
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (code == nullptr) {
    offset = offset < source.size() ? source[offset] : pattern.size();
    return absl::InvalidArgumentError(
        absl::StrCat("regex \"", AsAbsl(pattern), "\": ", PcreError(error), " at offset ", offset));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // optional: without JIT the interpreter is used
  return std::unique_ptr<Regex>(new Regex(std::string(pattern), code));
}

Regex::~Regex() { pcre2_code_free(AsCode(code_)); }

Regex::Scratch::Scratch(const Regex& regex)
    : data_(pcre2_match_data_create_from_pattern(AsCode(regex.code_), nullptr)) {}

Regex::Scratch::~Scratch() { pcre2_match_data_free(static_cast<pcre2_match_data*>(data_)); }

absl::Status Regex::FindAll(std::string_view subject, std::vector<std::pair<size_t, size_t>>* spans) const {
  Scratch scratch(*this);
  return FindAll(subject, scratch, spans);
}

absl::Status Regex::FindAll(std::string_view subject, Scratch& scratch,
                            std::vector<std::pair<size_t, size_t>>* spans) const {
  auto* data = static_cast<pcre2_match_data*>(scratch.data_);
  if (data == nullptr) return absl::ResourceExhaustedError("pcre2_match_data_create failed");
  const auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t start = 0;
  absl::Status status;
  while (start <= subject.size()) {
    // The subject was validated (or produced) as UTF-8 by the caller, so PCRE2 need not check it again.
    const int rc = pcre2_match(AsCode(code_), s, subject.size(), start, PCRE2_NO_UTF_CHECK, data, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      status = absl::InternalError(absl::StrCat("regex \"", pattern_, "\": ", PcreError(rc)));
      break;
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
    const size_t begin = ovector[0], end = ovector[1];
    if (end > begin) {
      spans->emplace_back(begin, end);
      start = end;
    } else {
      if (begin >= subject.size()) break;
      start = begin + Utf8Length(static_cast<unsigned char>(subject[begin]));
    }
  }
  return status;
}

int Regex::GroupCount() const {
  uint32_t count = 0;
  pcre2_pattern_info(AsCode(code_), PCRE2_INFO_CAPTURECOUNT, &count);
  return static_cast<int>(count);
}

absl::StatusOr<int> Regex::GroupOf(std::string_view group) const {
  const std::string name = group.empty() ? "1" : std::string(group);
  if (name.find_first_not_of("0123456789") != std::string::npos) {
    absl::StatusOr<int> number = GroupNumber(name);
    if (!number.ok()) return absl::InvalidArgumentError(number.status().message());
    return *number;
  }
  int number = 0;
  if (!absl::SimpleAtoi(name, &number) || number > GroupCount()) {
    return absl::InvalidArgumentError(absl::StrCat("group ", name.substr(0, 16),
                                                   " does not exist, the pattern has ", GroupCount(),
                                                   " capture group(s) (0 is the whole match)"));
  }
  return number;
}

absl::StatusOr<int> Regex::GroupNumber(std::string_view name) const {
  const std::string terminated(name);  // PCRE2 takes a zero-terminated name
  const int number =
      pcre2_substring_number_from_name(AsCode(code_), reinterpret_cast<PCRE2_SPTR>(terminated.c_str()));
  if (number == PCRE2_ERROR_NOSUBSTRING) {
    return absl::NotFoundError(
        absl::StrCat("regex \"", pattern_, "\" has no group named '", terminated, "'"));
  }
  if (number < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("regex \"", pattern_, "\", group '", terminated, "': ", PcreError(number)));
  }
  return number;
}

absl::StatusOr<bool> Regex::FullMatch(std::string_view subject) const {
  const Scratch scratch(*this);
  auto* data = static_cast<pcre2_match_data*>(scratch.data_);
  if (data == nullptr) return absl::ResourceExhaustedError("pcre2_match_data_create failed");
  const int rc = pcre2_match(AsCode(code_), reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(), 0,
                             PCRE2_ANCHORED | PCRE2_ENDANCHORED, data, nullptr);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc <= PCRE2_ERROR_UTF8_ERR1 && rc >= PCRE2_ERROR_UTF8_ERR21) {
    return absl::InvalidArgumentError(
        absl::StrCat("text is not valid UTF-8 (", PcreError(rc), ") at byte ", pcre2_get_startchar(data)));
  }
  if (rc < 0) return absl::InternalError(absl::StrCat("regex \"", pattern_, "\": ", PcreError(rc)));
  return true;
}

absl::StatusOr<std::optional<Regex::Groups>> Regex::FindLast(std::string_view subject) const {
  const Scratch scratch(*this);
  auto* data = static_cast<pcre2_match_data*>(scratch.data_);
  if (data == nullptr) return absl::ResourceExhaustedError("pcre2_match_data_create failed");
  const auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
  const int groups = GroupCount();
  std::optional<Groups> last;
  // PCRE2 checks the whole subject's UTF-8 on the first call only; the later ones start at code points.
  uint32_t options = 0;
  size_t start = 0;
  while (start <= subject.size()) {
    const int rc = pcre2_match(AsCode(code_), s, subject.size(), start, options, data, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc <= PCRE2_ERROR_UTF8_ERR1 && rc >= PCRE2_ERROR_UTF8_ERR21) {
      return absl::InvalidArgumentError(
          absl::StrCat("text is not valid UTF-8 (", PcreError(rc), ") at byte ", pcre2_get_startchar(data)));
    }
    if (rc < 0) return absl::InternalError(absl::StrCat("regex \"", pattern_, "\": ", PcreError(rc)));
    // rc is one more than the highest group that took part (0: the ovector was too small, which match
    // data made from the pattern never is).
    if (!last) last.emplace();
    last->assign(groups + 1, std::nullopt);
    for (int g = 0; g < rc; ++g) {
      if (ovector[2 * g] != PCRE2_UNSET) (*last)[g] = Span(ovector[2 * g], ovector[2 * g + 1]);
    }
    options = PCRE2_NO_UTF_CHECK;
    if (ovector[1] == ovector[0]) options |= PCRE2_NOTEMPTY_ATSTART;
    start = ovector[1];
  }
  return last;
}

}  // namespace zerofit::text
