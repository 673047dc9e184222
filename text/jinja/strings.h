// UTF-8 and Python str helpers shared by the Jinja filters and string methods. Python strings index by code
// point, so these decode; invalid UTF-8 bytes decode to U+FFFD.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace zerofit::text {

std::u32string DecodeUtf8(std::string_view s);
void AppendUtf8(std::string* out, char32_t c);
std::string EncodeUtf8(std::u32string_view s);
// Number of code points.
size_t Utf8Length(std::string_view s);

// Python str.isspace() for one code point.
bool IsPythonSpace(char32_t c);
// str.strip() / lstrip() / rstrip(): without `chars` strips whitespace, else any code point in `chars`.
std::string PyStrip(std::string_view s, bool left, bool right, const std::string* chars);
// str.split(sep, maxsplit): without `sep` splits on whitespace runs and drops empty parts. Precondition:
// `sep` is null or non-empty (Python raises "empty separator").
std::vector<std::string> PySplit(std::string_view s, const std::string* sep, int64_t maxsplit);
// str.rsplit(sep, maxsplit): like PySplit, splitting from the right.
std::vector<std::string> PyRSplit(std::string_view s, const std::string* sep, int64_t maxsplit);
// str.replace(old, new, count); count < 0 replaces all.
std::string PyReplace(std::string_view s, std::string_view from, std::string_view to, int64_t count);
// Case mappings: ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic (other scripts are kept as they are).
std::string PyUpper(std::string_view s);
std::string PyLower(std::string_view s);
// str.title(): each word starts upper, the rest lower.
std::string PyTitle(std::string_view s);
// str.capitalize(): first upper, the rest lower.
std::string PyCapitalize(std::string_view s);
// jinja2's title filter (not str.title): words split at whitespace and -({[<, each first code point upper
// and the rest lower ("they're" -> "They're", "a1b" -> "A1b").
std::string JinjaTitle(std::string_view s);

}  // namespace zerofit::text
