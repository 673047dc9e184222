#include "worker/data/line_chat_tokenizer.h"

#include "absl/strings/str_cat.h"

namespace zerofit::data {

absl::StatusOr<ChatExtras> ChatExtrasOf(const nlohmann::ordered_json& line) {
  ChatExtras e;
  auto tools = line.find("tools");
  if (tools != line.end() && !tools->is_null()) {
    if (!tools->is_array() && !tools->is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("field 'tools': expected a list of function schemas (or a JSON string of one), got ",
                       tools->type_name()));
    }
    e.tools_json = tools->dump();
  }
  auto kwargs = line.find("chat_template_kwargs");
  if (kwargs != line.end() && !kwargs->is_null()) {
    if (!kwargs->is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat("field 'chat_template_kwargs': expected an object of template variables, got ",
                       kwargs->type_name()));
    }
    e.kwargs_json = kwargs->dump();
  }
  return e;
}

}  // namespace zerofit::data
