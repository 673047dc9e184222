// The one translation unit that sees SentencePiece's headers.
//
// Why a bridge: Debian's sentencepiece_processor.h declares `namespace absl { using std::string_view; }`,
// while Debian's Abseil (built with ABSL_OPTION_USE_STD_STRING_VIEW=0) defines its own class
// absl::string_view. The two cannot meet in one translation unit, so this header is deliberately free of
// both Abseil and SentencePiece: it speaks std types only and reports errors as a bool plus a message.
// Everything else in zerofit::data wraps it into absl::Status (sentencepiece_tokenizer.cc,
// tokenizer_trainer.cc).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace zerofit::data::spm_bridge {

// RAII owner of a loaded sentencepiece::SentencePieceProcessor. Immutable after Load, so the const methods
// may be called from several threads at once (SentencePiece's own contract for a loaded processor).
class Processor {
 public:
  ~Processor();
  Processor(const Processor&) = delete;
  Processor& operator=(const Processor&) = delete;

  // Loads a serialized ModelProto (`tokenizer.model`). On failure returns nullptr and sets *error to
  // SentencePiece's message (without the path; callers add it).
  static std::unique_ptr<Processor> Load(const std::string& path, std::string* error);

  // Pieces of `text` as ids, no BOS/EOS added: the ids of ReferenceEncode, in time linear in the text (up
  // to the model's own BPE heap, O(n log n)). Returns false and sets *error on failure.
  //
  // Why not SentencePiece's Encode: without byte fallback it merges a run of consecutive unknown pieces
  // into one unk by re-copying the merged piece and surface for every character, so a run of n unknown
  // characters (one repeated character, a paragraph of CJK for an English model) takes O(n^2): 1M
  // characters ran 18 s and more (issue 29). Here such a model is encoded by a twin with byte fallback on
  // and the 256 byte pieces appended above its ids; byte fallback only changes how an unknown piece is
  // written out (as its bytes, in the same place: normalization, BPE merges and unigram scores ignore
  // byte pieces), so collapsing each run of byte ids into one unk gives SentencePiece's ids exactly.
  bool Encode(const std::string& text, std::vector<int>* ids, std::string* error) const;
  // SentencePiece's own Encode of the model as loaded: what Encode must equal (tests compare the two).
  bool ReferenceEncode(const std::string& text, std::vector<int>* ids, std::string* error) const;
  // False only for a model that keeps the library's quadratic encoding (its pieces clash with the byte
  // pieces, see Load).
  bool linear_encode() const;
  // Text of `ids`; control ids (BOS/EOS/PAD) decode to nothing. Ids must be in [0, piece_size()).
  bool Decode(const std::vector<int>& ids, std::string* text, std::string* error) const;

  int piece_size() const;
  // -1 when the model defines no such piece.
  int bos_id() const;
  int eos_id() const;
  int pad_id() const;
  int unk_id() const;

 private:
  struct Impl;
  explicit Processor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Runs SentencePieceTrainer::Train on the lines of `corpus_path` (streamed through a SentenceIterator) with
// `args`, SentencePiece's own flag names and string values (e.g. {"vocab_size", "64"}), and returns the
// serialized ModelProto in *model. Nothing is written to disk, and the model records no file path (its
// embedded trainer spec has no input or model_prefix), so the same corpus and args give the same bytes
// wherever they run. Returns false and sets *error on failure. Note: SentencePiece's log level is
// process-wide state of the library; passing {"minloglevel", ...} changes it for the whole process.
bool Train(const std::string& corpus_path, const std::vector<std::pair<std::string, std::string>>& args,
           std::string* model, std::string* error);

}  // namespace zerofit::data::spm_bridge
