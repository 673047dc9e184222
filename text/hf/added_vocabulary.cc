#include "text/hf/added_vocabulary.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "text/hf/bpe_model.h"
#include "text/string_view_compat.h"
#include "text/unicode.h"

namespace zerofit::text {
namespace {

absl::StatusOr<AddedToken> ParseAddedToken(const JsonView& json) {
  if (absl::Status s = json.ExpectObject(); !s.ok()) return s;
  AddedToken token;
  absl::StatusOr<int64_t> id = json.IntOr("id", -1, 0, std::numeric_limits<int32_t>::max() - 1);
  if (!id.ok()) return id.status();
  if (*id < 0) return json.ErrorAt("id", "missing");
  token.id = static_cast<int32_t>(*id);
  absl::StatusOr<std::string> content = json.String("content");
  if (!content.ok()) return content.status();
  if (content->empty()) return json.ErrorAt("content", "must not be empty");
  token.content = *std::move(content);
  const std::pair<const char*, bool*> flags[] = {{"single_word", &token.single_word},
                                                 {"lstrip", &token.lstrip},
                                                 {"rstrip", &token.rstrip},
                                                 {"normalized", &token.normalized},
                                                 {"special", &token.special}};
  for (const auto& [key, field] : flags) {
    absl::StatusOr<bool> value = json.BoolOr(key, false);
    if (!value.ok()) return value.status();
    *field = *value;
  }
  return token;
}

// Last / first code point of a string, for single_word's word-boundary test (HF: \w at the boundary).
bool IsWordChar(char32_t cp) { return cp == '_' || IsAlphanumeric(cp); }

bool EndsWithWordChar(std::string_view text) {
  if (text.empty()) return false;
  size_t start = text.size() - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  return IsWordChar(DecodeUtf8(text, &start));
}

bool StartsWithWordChar(std::string_view text) {
  size_t pos = 0;
  return !text.empty() && IsWordChar(DecodeUtf8(text, &pos));
}

}  // namespace

void AddedVocabulary::Trie::Insert(std::string_view content, int32_t token) {
  int32_t node = 0;
  for (const char c : content) {
    const auto b = static_cast<uint8_t>(c);
    auto it = nodes[node].children.find(b);
    if (it == nodes[node].children.end()) {
      nodes.emplace_back();
      it = nodes[node].children.emplace(b, static_cast<int32_t>(nodes.size() - 1)).first;
    }
    node = it->second;
  }
  if (nodes[node].token < 0) nodes[node].token = token;  // duplicate contents: the first one wins
  first_byte[static_cast<uint8_t>(content[0])] = true;
}

int32_t AddedVocabulary::Trie::LongestAt(std::string_view text, size_t pos, size_t* length) const {
  if (!first_byte[static_cast<uint8_t>(text[pos])]) return -1;
  int32_t node = 0, best = -1;
  for (size_t i = pos; i < text.size(); ++i) {
    auto it = nodes[node].children.find(static_cast<uint8_t>(text[i]));
    if (it == nodes[node].children.end()) break;
    node = it->second;
    if (nodes[node].token >= 0) {
      best = nodes[node].token;
      *length = i + 1 - pos;
    }
  }
  return best;
}

absl::StatusOr<AddedVocabulary> AddedVocabulary::FromJson(const JsonView& added_tokens,
                                                          const BpeModel& model) {
  AddedVocabulary vocab;
  if (added_tokens.is_null()) return vocab;
  if (absl::Status s = added_tokens.ExpectArray(); !s.ok()) return s;
  const int64_t model_size = model.vocab_entries();
  int64_t max_added = -1;
  for (size_t i = 0; i < added_tokens.value().size(); ++i) {
    absl::StatusOr<AddedToken> token = ParseAddedToken(added_tokens.at(i));
    if (!token.ok()) return token.status();
    if (vocab.FindByContent(token->content) != nullptr) continue;  // HF adds each content once
    // HF (AddedVocabulary::add_tokens) ignores the file's id: a token the model knows takes the model's
    // id, any other the next id after the model vocabulary and the added tokens so far.
    if (std::optional<int32_t> known = model.TokenToId(token->content)) {
      token->id = *known;
    } else {
      token->id =
          static_cast<int32_t>(max_added >= model_size || model_size == 0 ? max_added + 1 : model_size);
    }
    max_added = std::max<int64_t>(max_added, token->id);
    const auto index = static_cast<int32_t>(vocab.tokens_.size());
    (token->normalized ? vocab.normalized_ : vocab.raw_).Insert(token->content, index);
    vocab.by_id_.emplace(token->id, index);
    vocab.by_content_.emplace(token->content, index);
    vocab.tokens_.push_back(*std::move(token));
  }
  return vocab;
}

bool AddedVocabulary::AdjustMatch(const AddedToken& token, std::string_view text, size_t floor, size_t* begin,
                                  size_t* end) const {
  if (token.single_word) {
    if (EndsWithWordChar(text.substr(0, *begin)) || StartsWithWordChar(text.substr(*end))) return false;
  }
  if (token.lstrip) {
    size_t b = *begin;
    while (b > floor) {
      size_t start = b - 1;
      while (start > floor && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
      size_t pos = start;
      if (!IsWhitespace(DecodeUtf8(text, &pos))) break;
      b = start;
    }
    *begin = b;
  }
  if (token.rstrip) {
    size_t e = *end;
    while (e < text.size()) {
      size_t pos = e;
      if (!IsWhitespace(DecodeUtf8(text, &pos))) break;
      e = pos;
    }
    *end = e;
  }
  return true;
}

void AddedVocabulary::Split(std::string_view text, bool normalized, std::vector<TextSegment>* out) const {
  const Trie& trie = normalized ? normalized_ : raw_;
  size_t done = 0;  // end of the last emitted segment
  size_t pos = 0;
  while (pos < text.size() && !trie.empty()) {
    size_t length = 0;
    const int32_t index = trie.LongestAt(text, pos, &length);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[index];
    size_t begin = pos, end = pos + length;
    pos = end;  // like HF's matcher, a rejected match is not rescanned
    if (!AdjustMatch(token, text, done, &begin, &end)) continue;
    if (begin > done) out->push_back({text.substr(done, begin - done), std::nullopt, done});
    out->push_back({text.substr(begin, end - begin), token.id, begin});
    done = end;
    // Resume after what rstrip consumed too. (HF resumes inside it; that differs only for added tokens that
    // begin with whitespace, where HF would emit overlapping pieces.)
    pos = std::max(pos, end);
  }
  if (done < text.size()) out->push_back({text.substr(done), std::nullopt, done});
}

const AddedToken* AddedVocabulary::FindById(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocabulary::FindByContent(std::string_view content) const {
  auto it = by_content_.find(AsAbsl(content));
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

}  // namespace zerofit::text
