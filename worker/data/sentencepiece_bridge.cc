// No Abseil header may be included here (see sentencepiece_bridge.h).
#include "worker/data/sentencepiece_bridge.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <fstream>
#include <unordered_map>
#include <utility>

namespace zerofit::data::spm_bridge {

struct Processor::Impl {
  sentencepiece::SentencePieceProcessor sp;
};

Processor::Processor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Processor::~Processor() = default;

std::unique_ptr<Processor> Processor::Load(const std::string& path, std::string* error) {
  auto impl = std::make_unique<Impl>();
  const sentencepiece::util::Status status = impl->sp.Load(path);
  if (!status.ok()) {
    *error = status.ToString();
    return nullptr;
  }
  return std::unique_ptr<Processor>(new Processor(std::move(impl)));
}

bool Processor::Encode(const std::string& text, std::vector<int>* ids, std::string* error) const {
  const sentencepiece::util::Status status = impl_->sp.Encode(text, ids);
  if (!status.ok()) {
    *error = status.ToString();
    return false;
  }
  return true;
}

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
