#include "text/jinja/strings.h"

#include <algorithm>

namespace zerofit::text {

std::u32string DecodeUtf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (len == 0 || i + len > s.size()) {
      out.push_back(0xfffd);
      ++i;
      continue;
    }
    char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    bool ok = true;
    for (int k = 1; k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) ok = false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (!ok) {
      out.push_back(0xfffd);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += len;
  }
  return out;
}

void AppendUtf8(std::string* out, char32_t c) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xc0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3f)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xe0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xf0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3f)));
  }
}

std::string EncodeUtf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) AppendUtf8(&out, c);
  return out;
}

size_t Utf8Length(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  return n;
}

bool IsPythonSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f ||
         c == 0x3000;
}

std::string PyStrip(std::string_view s, bool left, bool right, const std::string* chars) {
  std::u32string cps = DecodeUtf8(s);
  std::u32string set = chars ? DecodeUtf8(*chars) : std::u32string();
  auto strip = [&](char32_t c) { return chars ? set.find(c) != std::u32string::npos : IsPythonSpace(c); };
  size_t b = 0;
  size_t e = cps.size();
  while (left && b < e && strip(cps[b])) ++b;
  while (right && e > b && strip(cps[e - 1])) --e;
  return EncodeUtf8(std::u32string_view(cps).substr(b, e - b));
}

std::vector<std::string> PySplit(std::string_view s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep != nullptr) {
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      size_t hit = s.find(*sep, pos);
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, hit - pos));
      pos = hit + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  std::u32string cps = DecodeUtf8(s);
  size_t i = 0;
  while (true) {
    while (i < cps.size() && IsPythonSpace(cps[i])) ++i;
    if (i == cps.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      out.push_back(EncodeUtf8(std::u32string_view(cps).substr(i)));  // the rest keeps its trailing space
      break;
    }
    size_t j = i;
    while (j < cps.size() && !IsPythonSpace(cps[j])) ++j;
    out.push_back(EncodeUtf8(std::u32string_view(cps).substr(i, j - i)));
    i = j;
  }
  return out;
}

std::vector<std::string> PyRSplit(std::string_view s, const std::string* sep, int64_t maxsplit) {
  if (maxsplit < 0) return PySplit(s, sep, maxsplit);
  std::vector<std::string> out;
  if (sep != nullptr) {
    size_t end = s.size();
    while (static_cast<int64_t>(out.size()) < maxsplit) {
      size_t hit = end >= sep->size() ? s.rfind(*sep, end - sep->size()) : std::string_view::npos;
      if (hit == std::string_view::npos || sep->empty()) break;
      out.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
      end = hit;
    }
    out.emplace_back(s.substr(0, end));
  } else {
    std::u32string cps = DecodeUtf8(s);
    size_t end = cps.size();
    while (true) {
      while (end > 0 && IsPythonSpace(cps[end - 1])) --end;
      if (end == 0) break;
      if (static_cast<int64_t>(out.size()) == maxsplit) {
        out.push_back(
            EncodeUtf8(std::u32string_view(cps).substr(0, end)));  // the rest keeps its leading space
        break;
      }
      size_t begin = end;
      while (begin > 0 && !IsPythonSpace(cps[begin - 1])) --begin;
      out.push_back(EncodeUtf8(std::u32string_view(cps).substr(begin, end - begin)));
      end = begin;
    }
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::string PyReplace(std::string_view s, std::string_view from, std::string_view to, int64_t count) {
  std::string out;
  size_t pos = 0;
  int64_t done = 0;
  if (from.empty()) {  // Python inserts `to` before every code point and at the end
    std::u32string cps = DecodeUtf8(s);
    for (char32_t c : cps) {
      if (count < 0 || done < count) {
        out.append(to);
        ++done;
      }
      AppendUtf8(&out, c);
    }
    if (count < 0 || done < count) out.append(to);
    return out;
  }
  while (count < 0 || done < count) {
    size_t hit = s.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

namespace {

// Simple (one-to-one) case mappings for Latin-1, Latin Extended-A, Greek and Cyrillic; other code points
// have no case here. Python's full mappings (final sigma, ß -> SS in upper) are handled where noted.
char32_t ToUpperCp(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if ((c >= 0xe0 && c <= 0xfe && c != 0xf7)) return c - 0x20;
  if (c == 0xff) return 0x178;
  if (c == 0xb5) return 0x39c;
  if (c >= 0x100 && c <= 0x17f) {
    bool odd_lower = (c >= 0x100 && c <= 0x137) || (c >= 0x14a && c <= 0x177);
    bool even_lower = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e);
    if (odd_lower && (c & 1)) return c - 1;
    if (even_lower && !(c & 1)) return c - 1;
    if (c == 0x131) return 'I';
    if (c == 0x17f) return 'S';
    return c;
  }
  if (c >= 0x3b1 && c <= 0x3c9 && c != 0x3c2) return c - 0x20;
  if (c == 0x3c2) return 0x3a3;
  if (c >= 0x3ac && c <= 0x3af) return c == 0x3ac ? 0x386 : c - 0x25;
  if (c >= 0x430 && c <= 0x44f) return c - 0x20;
  if (c >= 0x450 && c <= 0x45f) return c - 0x50;
  return c;
}

char32_t ToLowerCp(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c >= 0xc0 && c <= 0xde && c != 0xd7) return c + 0x20;
  if (c == 0x178) return 0xff;
  if (c >= 0x100 && c <= 0x17f) {
    bool even_upper = (c >= 0x100 && c <= 0x137) || (c >= 0x14a && c <= 0x177);
    bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e);
    if (even_upper && !(c & 1)) return c == 0x130 ? 'i' : c + 1;
    if (odd_upper && (c & 1)) return c + 1;
    return c;
  }
  if (c >= 0x391 && c <= 0x3a9 && c != 0x3a2) return c + 0x20;
  if (c == 0x386) return 0x3ac;
  if (c >= 0x388 && c <= 0x38a) return c + 0x25;
  if (c >= 0x410 && c <= 0x42f) return c + 0x20;
  if (c >= 0x400 && c <= 0x40f) return c + 0x50;
  return c;
}

bool IsCased(char32_t c) { return ToUpperCp(c) != c || ToLowerCp(c) != c || c == 0xdf; }

void AppendUpper(std::string* out, char32_t c) {
  if (c == 0xdf) {
    out->append("SS");
  } else {
    AppendUtf8(out, ToUpperCp(c));
  }
}

}  // namespace

std::string PyUpper(std::string_view s) {
  std::string out;
  for (char32_t c : DecodeUtf8(s)) AppendUpper(&out, c);
  return out;
}

std::string PyLower(std::string_view s) {
  std::u32string cps = DecodeUtf8(s);
  std::string out;
  for (size_t i = 0; i < cps.size(); ++i) {
    // Python's Final_Sigma rule: a capital sigma after a cased letter and not before one becomes final.
    bool final_sigma =
        cps[i] == 0x3a3 && i > 0 && IsCased(cps[i - 1]) && (i + 1 == cps.size() || !IsCased(cps[i + 1]));
    AppendUtf8(&out, final_sigma ? 0x3c2 : ToLowerCp(cps[i]));
  }
  return out;
}

std::string PyTitle(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (char32_t c : DecodeUtf8(s)) {
    if (prev_cased) {
      AppendUtf8(&out, ToLowerCp(c));
    } else {
      AppendUpper(&out, c);
    }
    prev_cased = IsCased(c);
  }
  return out;
}

std::string PyCapitalize(std::string_view s) {
  std::string out;
  bool first = true;
  for (char32_t c : DecodeUtf8(s)) {
    if (first) {
      AppendUpper(&out, c);
    } else {
      AppendUtf8(&out, ToLowerCp(c));
    }
    first = false;
  }
  return out;
}

std::string JinjaTitle(std::string_view s) {
  std::string out;
  bool word_start = true;
  for (char32_t c : DecodeUtf8(s)) {
    bool separator = IsPythonSpace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (separator) {
      AppendUtf8(&out, c);
    } else if (word_start) {
      AppendUpper(&out, c);
    } else {
      AppendUtf8(&out, ToLowerCp(c));
    }
    word_start = separator;
  }
  return out;
}

}  // namespace zerofit::text
