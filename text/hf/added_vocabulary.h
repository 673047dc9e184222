// Added tokens (tokenizer.json "added_tokens"): strings matched in the input before the model runs, so
// "<|im_start|>" or "</s>" written in text become their single ids. Matching follows HF AddedVocabulary:
// leftmost-longest over the raw text for tokens with normalized=false, then over each normalized piece
// for tokens with normalized=true; single_word, lstrip and rstrip are honoured. Immutable, thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "text/json_view.h"

namespace zerofit::text {

class BpeModel;

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
};

// A piece of input: either an added token (id set) or text still to be normalized and tokenized.
struct TextSegment {
  std::string_view text;
  std::optional<int32_t> token_id;
  size_t offset = 0;  // byte offset of `text` in the string that was split
};

class AddedVocabulary {
 public:
  // Ids are assigned as HF does on load (see the .cc); for files HF itself saved they equal the file's ids.
  static absl::StatusOr<AddedVocabulary> FromJson(const JsonView& added_tokens, const BpeModel& model);

  // Splits `text` on the added tokens whose `normalized` flag equals `normalized` (leftmost-longest).
  // Segments view `text`; empty text segments are omitted.
  void Split(std::string_view text, bool normalized, std::vector<TextSegment>* out) const;

  const AddedToken* FindById(int32_t id) const;
  const AddedToken* FindByContent(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }
  bool has_normalized_tokens() const { return !normalized_.empty(); }

 private:
  // A byte trie over token contents for one `normalized` class.
  struct Trie {
    struct Node {
      absl::flat_hash_map<uint8_t, int32_t> children;
      int32_t token = -1;  // index into tokens_
    };
    std::vector<Node> nodes = std::vector<Node>(1);
    bool first_byte[256] = {};
    bool empty() const { return nodes.size() == 1; }
    void Insert(std::string_view content, int32_t token);
    // Longest token starting at text[pos], as an index into tokens_, or -1.
    int32_t LongestAt(std::string_view text, size_t pos, size_t* length) const;
  };

  // Applies single_word / lstrip / rstrip to a raw match [*begin, *end); false drops the match.
  bool AdjustMatch(const AddedToken& token, std::string_view text, size_t floor, size_t* begin,
                   size_t* end) const;

  std::vector<AddedToken> tokens_;
  absl::flat_hash_map<int32_t, size_t> by_id_;
  absl::flat_hash_map<std::string, size_t> by_content_;
  Trie raw_;
  Trie normalized_;
};

}  // namespace zerofit::text
