// No Abseil header may be included here (see sentencepiece_bridge.h).
#include "worker/data/sentencepiece_bridge.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdio>
#include <fstream>
#include <unordered_map>
#include <utility>

namespace zerofit::data::spm_bridge {

struct Processor::Impl {
  sentencepiece::SentencePieceProcessor sp;  // the model as loaded: Decode, ids, ReferenceEncode
  // The same model with byte_fallback on and the 256 byte pieces appended (ids piece_size()..+255); null
  // when the model already falls back to bytes (its unknown runs are not merged, so it is linear as is).
  std::unique_ptr<sentencepiece::SentencePieceProcessor> byte_twin;
};

namespace {

void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void AppendLengthDelimited(int field, const std::string& payload, std::string* out) {
  AppendVarint((static_cast<uint64_t>(field) << 3) | 2, out);
  AppendVarint(payload.size(), out);
  out->append(payload);
}

// `serialized` (a ModelProto) with byte_fallback set and the 256 byte pieces "<0x00>".."<0xFF>" appended,
// in protobuf's wire format: a repeated field's entries appended to a message extend the list, and a
// second occurrence of a message field (trainer_spec) is merged into the first, so nothing is parsed.
// Field numbers from SentencePiece's sentencepiece_model.proto: ModelProto.pieces = 1 {piece = 1,
// score = 2 (float), type = 3 (BYTE = 6)}, ModelProto.trainer_spec = 2 {byte_fallback = 35}.
std::string WithBytePieces(std::string serialized) {
  for (int b = 0; b < 256; ++b) {
    char piece[8];
    std::snprintf(piece, sizeof piece, "<0x%02X>", b);  // SentencePiece's ByteToPiece
    std::string entry;
    AppendLengthDelimited(1, piece, &entry);
    entry.append({static_cast<char>((2 << 3) | 5), 0, 0, 0, 0});  // score 0.0f (fixed32)
    entry.append({static_cast<char>(3 << 3), 6});                 // type BYTE
    AppendLengthDelimited(1, entry, &serialized);
  }
  std::string trainer_spec;
  AppendVarint(35 << 3, &trainer_spec);
  trainer_spec.push_back(1);  // byte_fallback: true
  AppendLengthDelimited(2, trainer_spec, &serialized);
  return serialized;
}

bool HasBytePieces(const sentencepiece::SentencePieceProcessor& sp) {
  for (int id = 0; id < sp.GetPieceSize(); ++id) {
    if (sp.IsByte(id)) return true;
  }
  return false;
}

}  // namespace

Processor::Processor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Processor::~Processor() = default;

std::unique_ptr<Processor> Processor::Load(const std::string& path, std::string* error) {
  auto impl = std::make_unique<Impl>();
  const sentencepiece::util::Status status = impl->sp.Load(path);
  if (!status.ok()) {
    *error = status.ToString();
    return nullptr;
  }
  if (!HasBytePieces(impl->sp)) {
    auto twin = std::make_unique<sentencepiece::SentencePieceProcessor>();
    // A model whose own pieces clash with the byte pieces (a normal piece spelled "<0x41>") keeps the
    // library's encoding: the same ids, quadratic only in runs of unknown characters.
    if (twin->LoadFromSerializedProto(WithBytePieces(impl->sp.serialized_model_proto())).ok()) {
      impl->byte_twin = std::move(twin);
    }
  }
  return std::unique_ptr<Processor>(new Processor(std::move(impl)));
}

bool Processor::Encode(const std::string& text, std::vector<int>* ids, std::string* error) const {
  if (impl_->byte_twin == nullptr) return ReferenceEncode(text, ids, error);
  std::vector<int> twin_ids;
  const sentencepiece::util::Status status = impl_->byte_twin->Encode(text, &twin_ids);
  if (!status.ok()) {
    *error = status.ToString();
    return false;
  }
  // The twin spells each unknown piece as byte pieces (ids >= piece_size(), nothing else is that high);
  // SentencePiece without byte fallback merges a run of consecutive unknown pieces into one unk: so is
  // each run of byte ids here.
  const int first_byte_id = impl_->sp.GetPieceSize();
  const int unk = impl_->sp.unk_id();
  ids->clear();
  ids->reserve(twin_ids.size());
  bool in_unknown_run = false;
  for (const int id : twin_ids) {
    const bool unknown = id >= first_byte_id;
    if (!unknown || !in_unknown_run) ids->push_back(unknown ? unk : id);
    in_unknown_run = unknown;
  }
  return true;
}

bool Processor::ReferenceEncode(const std::string& text, std::vector<int>* ids, std::string* error) const {
  const sentencepiece::util::Status status = impl_->sp.Encode(text, ids);
  if (!status.ok()) {
    *error = status.ToString();
    return false;
  }
  return true;
}

bool Processor::linear_encode() const { return impl_->byte_twin != nullptr || HasBytePieces(impl_->sp); }

bool Processor::Decode(const std::vector<int>& ids, std::string* text, std::string* error) const {
  const sentencepiece::util::Status status = impl_->sp.Decode(ids, text);
  if (!status.ok()) {
    *error = status.ToString();
    return false;
  }
  return true;
}

int Processor::piece_size() const { return impl_->sp.GetPieceSize(); }
int Processor::bos_id() const { return impl_->sp.bos_id(); }
int Processor::eos_id() const { return impl_->sp.eos_id(); }
int Processor::pad_id() const { return impl_->sp.pad_id(); }
int Processor::unk_id() const { return impl_->sp.unk_id(); }

namespace {

// Streams a text file line by line into the trainer (SentencePiece's own input reader would record the path
// in the model).
class FileSentenceIterator final : public sentencepiece::SentenceIterator {
 public:
  explicit FileSentenceIterator(const std::string& path) : in_(path, std::ios::binary) { Next(); }
  bool done() const override { return done_; }
  void Next() override {
    done_ = !std::getline(in_, line_);
    if (!done_ && !line_.empty() && line_.back() == '\r') line_.pop_back();
  }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override {
    if (in_.bad())
      return sentencepiece::util::Status(sentencepiece::util::StatusCode::kDataLoss, "read failed");
    return sentencepiece::util::Status();
  }

 private:
  std::ifstream in_;
  std::string line_;
  bool done_ = false;
};

}  // namespace

bool Train(const std::string& corpus_path, const std::vector<std::pair<std::string, std::string>>& args,
           std::string* model, std::string* error) {
  FileSentenceIterator sentences(corpus_path);
  const std::unordered_map<std::string, std::string> kwargs(args.begin(), args.end());
  const sentencepiece::util::Status status =
      sentencepiece::SentencePieceTrainer::Train(kwargs, &sentences, model);
  if (!status.ok()) {
    *error = status.ToString();
    return false;
  }
  return true;
}

}  // namespace zerofit::data::spm_bridge
