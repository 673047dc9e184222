#include "text/hf/post_processor.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace zerofit::text {
namespace {

// The single-sequence template, flattened: special ids to emit, with kSequence marking where `ids` go.
class TemplateProcessor : public PostProcessor {
 public:
  static constexpr int64_t kSequence = -1;
  explicit TemplateProcessor(std::vector<int64_t> items) : items_(std::move(items)) {}
  void Process(std::vector<int32_t>* ids) const override {
    std::vector<int32_t> out;
    out.reserve(ids->size() + items_.size());
    for (const int64_t item : items_) {
      if (item == kSequence) {
        out.insert(out.end(), ids->begin(), ids->end());
      } else {
        out.push_back(static_cast<int32_t>(item));
      }
    }
    *ids = std::move(out);
  }

 private:
  std::vector<int64_t> items_;
};

class IdentityProcessor : public PostProcessor {
 public:
  void Process(std::vector<int32_t>* ids) const override {}
};

class SequenceProcessor : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> parts) : parts_(std::move(parts)) {}
  void Process(std::vector<int32_t>* ids) const override {
    for (const auto& part : parts_) part->Process(ids);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

absl::StatusOr<std::vector<int64_t>> SpecialTokenIds(const JsonView& special_tokens, const std::string& name,
                                                     const JsonView& at) {
  const JsonView entry = special_tokens[name];
  if (entry.is_null()) return at.Error(absl::StrCat("special token \"", name, "\" is not in special_tokens"));
  const JsonView ids = entry["ids"];
  if (absl::Status s = ids.ExpectArray(); !s.ok()) return s;
  std::vector<int64_t> out;
  for (size_t i = 0; i < ids.value().size(); ++i) {
    const nlohmann::json& id = ids.value()[i];
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return ids.at(i).Error("expected a non-negative 32-bit id");
    }
    out.push_back(id.get<int64_t>());
  }
  return out;
}

absl::StatusOr<std::unique_ptr<PostProcessor>> TemplateFromJson(const JsonView& json) {
  const JsonView single = json["single"];
  if (absl::Status s = single.ExpectArray(); !s.ok()) return s;
  std::vector<int64_t> items;
  for (size_t i = 0; i < single.value().size(); ++i) {
    const JsonView item = single.at(i);
    if (item.Has("Sequence")) {
      absl::StatusOr<std::string> which = item["Sequence"].String("id");
      if (!which.ok()) return which.status();
      if (*which != "A") return item["Sequence"].Unsupported("id", *which);
      items.push_back(TemplateProcessor::kSequence);
      continue;
    }
    absl::StatusOr<std::string> name = item["SpecialToken"].String("id");
    if (!name.ok()) return name.status();
    absl::StatusOr<std::vector<int64_t>> ids = SpecialTokenIds(json["special_tokens"], *name, item);
    if (!ids.ok()) return ids.status();
    items.insert(items.end(), ids->begin(), ids->end());
  }
  return std::make_unique<TemplateProcessor>(std::move(items));
}

// RobertaProcessing / BertProcessing: "cls": ["<s>", 0], "sep": ["</s>", 2]; single = cls A sep.
absl::StatusOr<std::unique_ptr<PostProcessor>> ClsSepFromJson(const JsonView& json) {
  std::vector<int64_t> items;
  for (const char* key : {"cls", "sep"}) {
    const JsonView pair = json[key];
    if (!pair.value().is_array() || pair.value().size() != 2 || !pair.value()[1].is_number_integer()) {
      return pair.Error("expected [token, id]");
    }
    items.push_back(pair.value()[1].get<int64_t>());
  }
  return std::make_unique<TemplateProcessor>(
      std::vector<int64_t>{items[0], TemplateProcessor::kSequence, items[1]});
}

absl::StatusOr<std::unique_ptr<PostProcessor>> SequenceFromJson(const JsonView& json) {
  const JsonView list = json["processors"];
  if (absl::Status s = list.ExpectArray(); !s.ok()) return s;
  std::vector<std::unique_ptr<PostProcessor>> parts;
  for (size_t i = 0; i < list.value().size(); ++i) {
    absl::StatusOr<std::unique_ptr<PostProcessor>> part = PostProcessorFromJson(list.at(i));
    if (!part.ok()) return part.status();
    parts.push_back(*std::move(part));
  }
  return std::make_unique<SequenceProcessor>(std::move(parts));
}

}  // namespace

absl::StatusOr<std::unique_ptr<PostProcessor>> PostProcessorFromJson(const JsonView& json) {
  if (absl::Status s = json.ExpectObject(); !s.ok()) return s;
  absl::StatusOr<std::string> type = json.Type();
  if (!type.ok()) return type.status();
  if (*type == "TemplateProcessing") return TemplateFromJson(json);
  if (*type == "ByteLevel") return std::make_unique<IdentityProcessor>();
  if (*type == "RobertaProcessing" || *type == "BertProcessing") return ClsSepFromJson(json);
  if (*type == "Sequence") return SequenceFromJson(json);
  return json.Unsupported("type", *type);
}

}  // namespace zerofit::text
