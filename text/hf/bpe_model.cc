#include "text/hf/bpe_model.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "text/hf/merge_queue.h"
#include "text/string_view_compat.h"
#include "text/unicode.h"

namespace zerofit::text {

struct BpeModel::Symbol {
  int32_t id;
  int32_t prev;  // index of the previous live symbol, -1 at the start
  int32_t next;  // index of the next live symbol, -1 at the end
  bool removed;
};

namespace {

constexpr int64_t kMaxId = std::numeric_limits<int32_t>::max() - 1;

// Words of at most this many symbols merge by scanning (most words); longer ones use the queue. Also a byte
// bound: a word of <= kScanLimit bytes has <= kScanLimit symbols.
constexpr size_t kScanLimit = 24;

}  // namespace

absl::StatusOr<std::unique_ptr<BpeModel>> BpeModel::FromJson(const JsonView& json) {
  if (absl::Status s = json.ExpectObject(); !s.ok()) return s;
  // Files written before tokenizers 0.10 have no "type"; they are BPE whenever they carry merges.
  if (json.Has("type")) {
    absl::StatusOr<std::string> type = json.Type();
    if (!type.ok()) return type.status();
    if (*type != "BPE") return json.Unsupported("type", *type);
  } else if (!json.Has("merges")) {
    return json.ErrorAt("type", "missing, and the model has no merges (only BPE is supported)");
  }
  std::unique_ptr<BpeModel> model(new BpeModel());
  if (absl::Status s = model->LoadOptions(json); !s.ok()) return s;
  if (absl::Status s = model->LoadVocab(json["vocab"]); !s.ok()) return s;
  if (absl::Status s = model->LoadMerges(json["merges"]); !s.ok()) return s;
  if (json.Has("unk_token") && !json["unk_token"].is_null()) {
    absl::StatusOr<std::string> unk = json.String("unk_token");
    if (!unk.ok()) return unk.status();
    std::optional<int32_t> id = model->TokenToId(*unk);
    if (!id) return json.ErrorAt("unk_token", absl::StrCat("\"", *unk, "\" is not in the vocabulary"));
    model->unk_id_ = *id;
  }
  return model;
}

absl::Status BpeModel::LoadOptions(const JsonView& json) {
  const JsonView dropout = json["dropout"];
  if (!dropout.is_null() && !(dropout.value().is_number() && dropout.value().get<double>() == 0.0)) {
    return dropout.Error("unsupported dropout (only null)");
  }
  absl::StatusOr<std::string> prefix = json.StringOr("continuing_subword_prefix", "");
  if (!prefix.ok()) return prefix.status();
  absl::StatusOr<std::string> suffix = json.StringOr("end_of_word_suffix", "");
  if (!suffix.ok()) return suffix.status();
  absl::StatusOr<bool> fuse = json.BoolOr("fuse_unk", false);
  if (!fuse.ok()) return fuse.status();
  absl::StatusOr<bool> fallback = json.BoolOr("byte_fallback", false);
  if (!fallback.ok()) return fallback.status();
  absl::StatusOr<bool> ignore = json.BoolOr("ignore_merges", false);
  if (!ignore.ok()) return ignore.status();
  continuing_subword_prefix_ = *std::move(prefix);
  end_of_word_suffix_ = *std::move(suffix);
  plain_chars_ = continuing_subword_prefix_.empty() && end_of_word_suffix_.empty();
  fuse_unk_ = *fuse;
  byte_fallback_ = *fallback;
  ignore_merges_ = *ignore;
  return absl::OkStatus();
}

absl::Status BpeModel::LoadVocab(const JsonView& vocab) {
  if (absl::Status s = vocab.ExpectObject(); !s.ok()) return s;
  vocab_.reserve(vocab.value().size());
  for (const auto& [token, id_json] : vocab.value().items()) {
    if (!id_json.is_number_integer() || id_json.get<int64_t>() < 0 || id_json.get<int64_t>() > kMaxId) {
      return vocab[token].Error("expected a non-negative 32-bit id");
    }
    const auto id = static_cast<int32_t>(id_json.get<int64_t>());
    if (static_cast<size_t>(id) >= vocab.value().size() * 2 + 1024) {
      return vocab[token].Error(absl::StrCat("id ", id, " is far beyond the vocabulary size"));
    }
    vocab_[token] = id;
    if (static_cast<size_t>(id) >= id_to_token_.size()) {
      id_to_token_.resize(id + 1);
      id_present_.resize(id + 1, false);
    }
    id_to_token_[id] = token;
    id_present_[id] = true;
    IndexTokenChars(token, id);
  }
  for (int b = 0; b < 256; ++b) {
    auto it = vocab_.find(absl::StrFormat("<0x%02X>", b));
    if (it != vocab_.end()) byte_ids_[b] = it->second;
  }
  return absl::OkStatus();
}

void BpeModel::IndexTokenChars(const std::string& token, int32_t id) {
  size_t pos = 0;
  char32_t previous = 0;
  for (size_t i = 0; pos < token.size(); ++i) {
    const char32_t cp = DecodeUtf8(token, &pos);
    if (i > 0) inner_pairs_.insert((static_cast<uint64_t>(previous) << 32) | cp);
    previous = cp;
    if (i == 0 && pos == token.size()) char_ids_[cp] = id;
  }
}

absl::Status BpeModel::LoadMerges(const JsonView& merges) {
  if (absl::Status s = merges.ExpectArray(); !s.ok()) return s;
  merges_.reserve(merges.value().size());
  for (size_t i = 0; i < merges.value().size(); ++i) {
    const JsonView merge = merges.at(i);
    const nlohmann::json& v = merge.value();
    absl::Status status;
    if (v.is_string()) {
      // Legacy "a b": exactly one space (HF splits on ' ' and wants two parts).
      const std::string& line = v.get_ref<const std::string&>();
      const size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
        return merge.Error(absl::StrCat("bad merge \"", line, "\" (expected \"left right\")"));
      }
      status = AddMerge(merge, std::string_view(line).substr(0, space),
                        std::string_view(line).substr(space + 1), i);
    } else if (v.is_array() && v.size() == 2 && v[0].is_string() && v[1].is_string()) {
      status = AddMerge(merge, v[0].get_ref<const std::string&>(), v[1].get_ref<const std::string&>(), i);
    } else {
      return merge.Error("bad merge (expected \"left right\" or [\"left\", \"right\"])");
    }
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status BpeModel::AddMerge(const JsonView& at, std::string_view left, std::string_view right,
                                uint32_t rank) {
  const std::optional<int32_t> left_id = TokenToId(left);
  const std::optional<int32_t> right_id = TokenToId(right);
  if (!left_id || !right_id) {
    return at.Error(
        absl::StrCat("merge token \"", AsAbsl(!left_id ? left : right), "\" is not in the vocabulary"));
  }
  const size_t strip = std::min(continuing_subword_prefix_.size(), right.size());
  const std::string merged = absl::StrCat(AsAbsl(left), AsAbsl(right.substr(strip)));
  const std::optional<int32_t> new_id = TokenToId(merged);
  if (!new_id) return at.Error(absl::StrCat("merged token \"", merged, "\" is not in the vocabulary"));
  merges_[PairKey(*left_id, *right_id)] =
      Merge{rank, *new_id};  // a repeated pair keeps the later rank, as HF
  return absl::OkStatus();
}

std::optional<int32_t> BpeModel::TokenToId(std::string_view token) const {
  auto it = vocab_.find(AsAbsl(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string_view> BpeModel::IdToToken(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || !id_present_[id]) return std::nullopt;
  return std::string_view(id_to_token_[id]);
}

const BpeModel::Merge* BpeModel::FindMerge(int32_t left, int32_t right) const {
  auto it = merges_.find(PairKey(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeModel::InitialSymbols(std::string_view word, std::vector<Symbol>* symbols) const {
  auto add = [symbols](int32_t id) {
    const auto index = static_cast<int32_t>(symbols->size());
    symbols->push_back({id, index - 1, -1, false});
    if (index > 0) (*symbols)[index - 1].next = index;
  };
  std::optional<int32_t> pending_unk;  // HF's `unk`: flushed before the next known symbol
  std::string key;
  for (size_t pos = 0; pos < word.size();) {
    const size_t begin = pos;
    const char32_t cp = DecodeUtf8(word, &pos);
    std::optional<int32_t> id;
    std::string_view piece = word.substr(begin, pos - begin);
    if (plain_chars_) {
      auto it = char_ids_.find(cp);
      if (it != char_ids_.end()) id = it->second;
    } else {
      key.clear();
      if (begin > 0) key += continuing_subword_prefix_;
      key += piece;
      if (pos == word.size()) key += end_of_word_suffix_;
      id = TokenToId(key);
      piece = key;
    }
    if (id) {
      if (pending_unk) add(*std::exchange(pending_unk, std::nullopt));
      add(*id);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (const char c : piece) all = all && byte_ids_[static_cast<uint8_t>(c)] >= 0;
      if (all) {
        for (const char c : piece) add(byte_ids_[static_cast<uint8_t>(c)]);
        continue;
      }
    }
    if (!unk_id_) continue;
    if (pending_unk && !fuse_unk_) add(*pending_unk);
    pending_unk = unk_id_;
  }
  if (pending_unk) add(*pending_unk);
}

void BpeModel::MergeAt(std::vector<Symbol>* symbols, int32_t pos, int32_t new_id) const {
  std::vector<Symbol>& s = *symbols;
  Symbol& cur = s[pos];
  Symbol& right = s[cur.next];
  cur.id = new_id;
  right.removed = true;
  cur.next = right.next;
  if (cur.next >= 0) s[cur.next].prev = pos;
}

// Short words: repeatedly merge the leftmost lowest-rank pair by scanning. Picks exactly what the queue
// would (the minimum of (rank, position)) without its overhead; O(n^2) only for n <= kScanLimit.
void BpeModel::MergeByScan(std::vector<Symbol>* symbols) const {
  std::vector<Symbol>& s = *symbols;
  if (s.size() < 2) return;
  // merge_of[i]: the merge of the pair starting at live symbol i (null when none); only the pairs around a
  // merge change, so each step costs one scan of this array and two lookups.
  const Merge* merge_of[kScanLimit];
  for (size_t i = 0; i + 1 < s.size(); ++i) merge_of[i] = FindMerge(s[i].id, s[i + 1].id);
  merge_of[s.size() - 1] = nullptr;
  while (true) {
    const Merge* best = nullptr;
    int32_t best_pos = -1;
    for (int32_t i = 0; i >= 0; i = s[i].next) {
      if (merge_of[i] != nullptr && (best == nullptr || merge_of[i]->rank < best->rank)) {
        best = merge_of[i];
        best_pos = i;
      }
    }
    if (best == nullptr) return;
    MergeAt(symbols, best_pos, best->new_id);
    const Symbol& cur = s[best_pos];
    merge_of[best_pos] = cur.next >= 0 ? FindMerge(cur.id, s[cur.next].id) : nullptr;
    if (cur.prev >= 0) merge_of[cur.prev] = FindMerge(s[cur.prev].id, cur.id);
  }
}

// Long words: HF's Word::merge_all order (lowest rank, then leftmost position) from a MergeQueue. A popped
// candidate is stale when the pair now at its position is no longer the pair of that merge rank.
void BpeModel::MergeByQueue(std::vector<Symbol>* symbols) const {
  std::vector<Symbol>& s = *symbols;
  MergeQueue queue;
  auto push = [&](int32_t left) {
    if (const Merge* m = FindMerge(s[left].id, s[s[left].next].id)) queue.Push(m->rank, left);
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(s.size()); ++i) push(i);
  uint32_t rank = 0;
  int32_t pos = 0;
  while (queue.Pop(&rank, &pos)) {
    const Symbol& cur = s[pos];
    if (cur.removed || cur.next < 0) continue;
    const Merge* m = FindMerge(cur.id, s[cur.next].id);
    if (m == nullptr || m->rank != rank) continue;
    MergeAt(symbols, pos, m->new_id);
    if (s[pos].prev >= 0) push(s[pos].prev);
    if (s[pos].next >= 0) push(pos);
  }
}

bool BpeModel::IsCut(char32_t left, char32_t right) const {
  return char_ids_.contains(left) && char_ids_.contains(right) &&
         !inner_pairs_.contains((static_cast<uint64_t>(left) << 32) | right);
}

void BpeModel::Tokenize(std::string_view word, std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (std::optional<int32_t> id = TokenToId(word)) {
      ids->push_back(*id);
      return;
    }
  }
  if (!plain_chars_ || word.size() <= kScanLimit) {
    TokenizeCached(word, ids);
    return;
  }
  // Long words (SentencePiece models see whole sentences as one word): cut where no merge can cross, so
  // each stretch is short. Both chars must be vocabulary chars so byte fallback and unk runs stay whole.
  size_t span_begin = 0, pos = 0;
  char32_t previous = DecodeUtf8(word, &pos);
  while (pos < word.size()) {
    const size_t begin = pos;
    const char32_t cp = DecodeUtf8(word, &pos);
    if (IsCut(previous, cp)) {
      TokenizeCached(word.substr(span_begin, begin - span_begin), ids);
      span_begin = begin;
    }
    previous = cp;
  }
  TokenizeCached(word.substr(span_begin), ids);
}

void BpeModel::TokenizeCached(std::string_view span, std::vector<int32_t>* ids) const {
  if (cache_.Lookup(span, ids)) return;
  const size_t before = ids->size();
  TokenizeSpan(span, ids);
  cache_.Insert(span, ids->data() + before, ids->size() - before);
}

void BpeModel::TokenizeSpan(std::string_view span, std::vector<int32_t>* ids) const {
  std::vector<Symbol> symbols;
  symbols.reserve(span.size());
  InitialSymbols(span, &symbols);
  if (symbols.size() <= kScanLimit) {
    MergeByScan(&symbols);
  } else {
    MergeByQueue(&symbols);
  }
  for (int32_t i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) ids->push_back(symbols[i].id);
}

}  // namespace zerofit::text
