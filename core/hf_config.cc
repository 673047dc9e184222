#include "core/hf_config.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/excerpt.h"
#include "core/json_depth.h"
#include "core/regular_file.h"
#include "core/status_macros.h"
#include "nlohmann/json.hpp"

namespace zerofit::core {
namespace {

using Json = nlohmann::json;

// One supported decoder family. Defaults are those of the family's transformers config class
// (LlamaConfig, MistralConfig, Qwen2Config) for the fields a config.json may omit.
struct Family {
  const char* model_type;
  const char* prefix;  // architecture = prefix + "ForCausalLM" / "ForSequenceClassification"
  int64_t default_max_position_embeddings;
};
constexpr Family kFamilies[] = {
    {"llama", "Llama", 2048},
    {"mistral", "Mistral", 4096 * 32},
    {"qwen2", "Qwen2", 32768},
};
constexpr const char* kCausalLm = "ForCausalLM";
constexpr const char* kSeqCls = "ForSequenceClassification";

// Upper bounds on the sizes a config.json may give, checked before anything is sized from them (the
// planner allocates per layer, the model per vocabulary entry). Each is well above any released model;
// their point is that a corrupt or hostile value (2^31 layers, 2^62 positions) is an error, not a
// bad_alloc, and that products of two of them fit in 64 bits.
constexpr int64_t kMaxVocab = int64_t{1} << 24;
constexpr int64_t kMaxHidden = int64_t{1} << 18;
constexpr int64_t kMaxIntermediate = int64_t{1} << 20;
constexpr int64_t kMaxLayers = int64_t{1} << 12;
constexpr int64_t kMaxHeads = int64_t{1} << 12;
constexpr int64_t kMaxHeadDim = int64_t{1} << 14;
constexpr int64_t kMaxPositions = int64_t{1} << 24;
constexpr int64_t kMaxLabels = int64_t{1} << 16;

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string SupportedArchitectures() {
  std::string s;
  for (const Family& f : kFamilies) {
    absl::StrAppend(&s, s.empty() ? "" : ", ", f.prefix, kCausalLm, ", ", f.prefix, kSeqCls);
  }
  return s;
}

// A JSON value for an error message, bounded (core/excerpt.h).
std::string JsonExcerpt(const Json& j) {
  return core::Excerpt(j.dump(-1, ' ', false, Json::error_handler_t::replace));
}

// Typed access to the fields of one JSON object. A field that is absent or null counts as absent (HF
// writes null for unset optional fields). Every error names the source file and the field, with
// `prefix` for nested objects ("rope_scaling.").
class FieldReader {
 public:
  FieldReader(const Json& obj, const std::string& source, std::string prefix = "")
      : obj_(obj), source_(source), prefix_(std::move(prefix)) {}

  absl::Status Error(const std::string& field, const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": field '", prefix_, field, "': ", what));
  }
  absl::Status Missing(const std::string& field, const char* required) const {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ": field '", prefix_, field, "' is missing (", required, " is required)"));
  }
  absl::Status TypeError(const std::string& field, const char* expected, const Json& got) const {
    return Error(field,
                 absl::StrCat("expected ", expected, ", got ", got.type_name(), " ", JsonExcerpt(got)));
  }

  const Json* Get(const std::string& field) const {
    const auto it = obj_.find(field);
    return it == obj_.end() || it->is_null() ? nullptr : &*it;
  }

  absl::Status Int(const std::string& field, const Json& j, int64_t* out) const {
    if (j.is_number_unsigned()) {
      if (j.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Error(field, absl::StrCat(JsonExcerpt(j), " is out of range"));
      }
    } else if (!j.is_number_integer()) {
      return TypeError(field, "an integer", j);
    }
    *out = j.get<int64_t>();
    return absl::OkStatus();
  }

  // An integer in [1, max]. Leaves *out (the default) alone when the field is absent.
  absl::Status OptionalPositive(const std::string& field, int64_t max, int64_t* out) const {
    const Json* j = Get(field);
    if (j == nullptr) return absl::OkStatus();
    int64_t v = 0;
    ZF_RETURN_IF_ERROR(Int(field, *j, &v));
    if (v <= 0) return Error(field, absl::StrCat("must be a positive integer, got ", v));
    if (v > max) return Error(field, absl::StrCat(v, " exceeds the limit of ", max));
    *out = v;
    return absl::OkStatus();
  }

  absl::Status RequiredPositive(const std::string& field, int64_t max, int64_t* out) const {
    if (Get(field) == nullptr) return Missing(field, "a positive integer");
    return OptionalPositive(field, max, out);
  }

  absl::Status OptionalPositiveDouble(const std::string& field, double* out) const {
    const Json* j = Get(field);
    if (j == nullptr) return absl::OkStatus();
    if (!j->is_number()) return TypeError(field, "a number", *j);
    const double v = j->get<double>();
    if (!(v > 0)) return Error(field, absl::StrCat("must be positive, got ", v));
    if (!std::isfinite(v)) return Error(field, absl::StrCat("must be finite, got ", v));
    *out = v;
    return absl::OkStatus();
  }

  absl::Status RequiredPositiveDouble(const std::string& field, double* out) const {
    if (Get(field) == nullptr) return Missing(field, "a positive number");
    return OptionalPositiveDouble(field, out);
  }

  absl::Status OptionalBool(const std::string& field, bool* out) const {
    const Json* j = Get(field);
    if (j == nullptr) return absl::OkStatus();
    if (!j->is_boolean()) return TypeError(field, "a boolean", *j);
    *out = j->get<bool>();
    return absl::OkStatus();
  }

  absl::Status OptionalString(const std::string& field, std::string* out) const {
    const Json* j = Get(field);
    if (j == nullptr) return absl::OkStatus();
    if (!j->is_string()) return TypeError(field, "a string", *j);
    *out = j->get<std::string>();
    return absl::OkStatus();
  }

  // A token id in [0, vocab_size), or a list of them (Llama 3 lists several eos ids): each is checked,
  // the first is kept.
  // `minus_one_is_none`: -1 means "no such token" (what old Llama conversions write for pad_token_id).
  // A token id, or a list of them (the first into `out`, the others into `more` when given).
  absl::Status OptionalTokenId(const std::string& field, int64_t vocab_size, std::optional<int64_t>* out,
                               bool minus_one_is_none = false, std::vector<int64_t>* more = nullptr) const {
    const Json* j = Get(field);
    if (j == nullptr) return absl::OkStatus();
    if (minus_one_is_none && j->is_number_integer() && j->get<int64_t>() == -1) return absl::OkStatus();
    if (j->is_array() && j->empty()) return absl::OkStatus();
    const bool list = j->is_array();
    const size_t n = list ? j->size() : 1;
    for (size_t i = 0; i < n; ++i) {
      const Json& e = list ? (*j)[i] : *j;
      int64_t v = 0;
      ZF_RETURN_IF_ERROR(Int(field, e, &v));
      if (v < 0 || v >= vocab_size) {
        return Error(field,
                     absl::StrCat(list ? absl::StrCat("entry ", i, ": ") : "", v,
                                  " is not a token id of the vocabulary [0, vocab_size = ", vocab_size, ")"));
      }
      if (i == 0) *out = v;
      if (i > 0 && more != nullptr) more->push_back(v);
    }
    return absl::OkStatus();
  }

  // Fields zerofit does not use but transformers does: still checked for their type, so that a config
  // that transformers would refuse (or misread) is refused here too.
  absl::Status OptionalNumber(const std::string& field, double lo, double hi) const {
    const Json* j = Get(field);
    if (j == nullptr) return absl::OkStatus();
    if (!j->is_number()) return TypeError(field, "a number", *j);
    const double v = j->get<double>();
    if (!(v >= lo && v <= hi)) return Error(field, absl::StrCat("must lie in [", lo, ", ", hi, "], got ", v));
    return absl::OkStatus();
  }

 private:
  const Json& obj_;
  const std::string& source_;
  std::string prefix_;
};

// The types and ranges of the fields transformers reads and zerofit does not.
absl::Status CheckUnusedFields(const FieldReader& r) {
  ZF_RETURN_IF_ERROR(r.OptionalNumber("initializer_range", 0, 1e3));
  ZF_RETURN_IF_ERROR(r.OptionalNumber("attention_dropout", 0, 1));
  ZF_RETURN_IF_ERROR(r.OptionalNumber("hidden_dropout", 0, 1));
  int64_t unused = 0;
  ZF_RETURN_IF_ERROR(r.OptionalPositive("pretraining_tp", kMaxHeads, &unused));
  ZF_RETURN_IF_ERROR(r.OptionalNumber("max_window_layers", 0, kMaxLayers));
  bool flag = false;
  for (const char* field : {"use_cache", "use_sliding_window", "tie_word_embeddings", "attention_bias"}) {
    ZF_RETURN_IF_ERROR(r.OptionalBool(field, &flag));
  }
  std::string text;
  for (const char* field : {"transformers_version", "torch_dtype", "dtype", "problem_type", "hidden_act"}) {
    ZF_RETURN_IF_ERROR(r.OptionalString(field, &text));
  }
  return absl::OkStatus();
}

// `top` reads the enclosing config, `j` is its (non-null) `field` value: "rope_scaling", or transformers 5's
// "rope_parameters" (the same keys, with rope_theta among them).
absl::StatusOr<std::optional<RopeScaling>> ParseRopeScaling(const FieldReader& top, const Json& j,
                                                            const std::string& source,
                                                            const std::string& field = "rope_scaling") {
  if (!j.is_object()) return top.TypeError(field, "an object or null", j);
  FieldReader r(j, source, field + ".");
  // transformers >= 4.43 writes "rope_type"; older configs use "type".
  const char* key = r.Get("rope_type") != nullptr ? "rope_type" : "type";
  if (r.Get(key) == nullptr) return top.Error(field, "has neither 'rope_type' nor 'type'");
  RopeScaling rs;
  ZF_RETURN_IF_ERROR(r.OptionalString(key, &rs.type));
  if (rs.type == "default") return std::optional<RopeScaling>();
  if (rs.type == "linear" || rs.type == "dynamic") {
    ZF_RETURN_IF_ERROR(r.RequiredPositiveDouble("factor", &rs.factor));
    return std::optional<RopeScaling>(rs);
  }
  if (rs.type == "llama3") {
    ZF_RETURN_IF_ERROR(r.RequiredPositiveDouble("factor", &rs.factor));
    ZF_RETURN_IF_ERROR(r.RequiredPositiveDouble("low_freq_factor", &rs.low_freq_factor));
    ZF_RETURN_IF_ERROR(r.RequiredPositiveDouble("high_freq_factor", &rs.high_freq_factor));
    ZF_RETURN_IF_ERROR(r.RequiredPositive("original_max_position_embeddings", kMaxPositions,
                                          &rs.original_max_position_embeddings));
    // The llama3 rule interpolates over (high - low); equal factors would divide by zero.
    if (!(rs.high_freq_factor > rs.low_freq_factor)) {
      return r.Error("high_freq_factor",
                     absl::StrCat(rs.high_freq_factor, " must exceed low_freq_factor ", rs.low_freq_factor));
    }
    return std::optional<RopeScaling>(rs);
  }
  return absl::UnimplementedError(absl::StrCat(source, ": field '", field, ".", key, "': unsupported type '",
                                               rs.type, "' (supported: default, linear, dynamic, llama3)"));
}

bool SameRope(const std::optional<RopeScaling>& a, const std::optional<RopeScaling>& b) {
  if (!a || !b) return a.has_value() == b.has_value();
  return a->type == b->type && a->factor == b->factor && a->low_freq_factor == b->low_freq_factor &&
         a->high_freq_factor == b->high_freq_factor &&
         a->original_max_position_embeddings == b->original_max_position_embeddings;
}

// RoPE's base and scaling. transformers 5 writes them together as "rope_parameters" ({"rope_type",
// "rope_theta", "factor", ...}) and no top-level rope_theta or rope_scaling; earlier versions write those
// two. Both forms given must agree: a config that says two things is refused, not read one way.
absl::Status ParseRope(const FieldReader& r, const std::string& source, HfModelConfig* c) {
  c->rope_theta = 10000.0;
  ZF_RETURN_IF_ERROR(r.OptionalPositiveDouble("rope_theta", &c->rope_theta));
  if (const Json* rs = r.Get("rope_scaling")) {
    ZF_ASSIGN_OR_RETURN(c->rope_scaling, ParseRopeScaling(r, *rs, source));
  }
  const Json* params = r.Get("rope_parameters");
  if (params == nullptr) return absl::OkStatus();
  ZF_ASSIGN_OR_RETURN(std::optional<RopeScaling> scaling,
                      ParseRopeScaling(r, *params, source, "rope_parameters"));
  if (r.Get("rope_scaling") != nullptr && !SameRope(scaling, c->rope_scaling)) {
    return r.Error("rope_parameters",
                   "disagrees with field 'rope_scaling' (transformers 5 reads only "
                   "rope_parameters: remove rope_scaling or make the two agree)");
  }
  c->rope_scaling = scaling;
  const FieldReader p(*params, source, "rope_parameters.");
  double theta = c->rope_theta;
  ZF_RETURN_IF_ERROR(p.OptionalPositiveDouble("rope_theta", &theta));
  if (r.Get("rope_theta") != nullptr && theta != c->rope_theta) {
    return p.Error("rope_theta",
                   absl::StrCat(theta, " disagrees with the top-level rope_theta ", c->rope_theta));
  }
  c->rope_theta = theta;
  return absl::OkStatus();
}

bool MulAdd(int64_t a, int64_t b, int64_t* acc) {
  int64_t p = 0;
  return !__builtin_mul_overflow(a, b, &p) && !__builtin_add_overflow(*acc, p, acc);
}

// The exact parameter count, or false when it does not fit in int64.
bool CountParameters(const HfModelConfig& c, int64_t* out) {
  const int64_t h = c.hidden_size;
  int64_t q_out = 0, kv_out = 0;
  if (__builtin_mul_overflow(c.num_attention_heads, c.head_dim, &q_out) ||
      __builtin_mul_overflow(c.num_key_value_heads, c.head_dim, &kv_out)) {
    return false;
  }
  int64_t layer = 0;
  bool ok = MulAdd(h, q_out, &layer) && MulAdd(h, kv_out, &layer) && MulAdd(h, kv_out, &layer) &&  // q k v
            MulAdd(q_out, h, &layer) &&                                                            // o
            MulAdd(h, c.intermediate_size, &layer) && MulAdd(h, c.intermediate_size, &layer) &&    // gate up
            MulAdd(c.intermediate_size, h, &layer) &&                                              // down
            MulAdd(2, h, &layer);  // input and post-attention RMSNorm
  if (c.attention_bias) ok = ok && MulAdd(1, q_out, &layer) && MulAdd(2, kv_out, &layer);
  int64_t total = 0;
  ok = ok && MulAdd(c.vocab_size, h, &total) && MulAdd(c.num_hidden_layers, layer, &total) &&
       MulAdd(1, h, &total);
  if (c.is_sequence_classification()) {
    ok = ok && MulAdd(c.num_labels, h, &total);  // score head, no bias
  } else if (!c.tie_word_embeddings) {
    ok = ok && MulAdd(c.vocab_size, h, &total);  // lm_head
  }
  if (!ok) return false;
  *out = total;
  return true;
}

}  // namespace

bool HfModelConfig::is_sequence_classification() const { return EndsWith(architecture, kSeqCls); }

int64_t HfModelConfig::ParameterCount() const {
  int64_t n = 0;
  // ParseHfConfig refuses configs whose count overflows; a hand-built one saturates.
  return CountParameters(*this, &n) ? n : std::numeric_limits<int64_t>::max();
}

namespace {

// The architecture and model type: the family they name (both given must agree; either alone suffices).
absl::Status ParseFamily(const FieldReader& r, const std::string& source, HfModelConfig* c,
                         const Family** family) {
  *family = nullptr;
  if (const Json* archs = r.Get("architectures")) {
    if (!archs->is_array()) return r.TypeError("architectures", "a list of strings", *archs);
    if (!archs->empty()) {
      if (!archs->front().is_string()) return r.TypeError("architectures", "a list of strings", *archs);
      c->architecture = archs->front().get<std::string>();
    }
  }
  ZF_RETURN_IF_ERROR(r.OptionalString("model_type", &c->model_type));
  if (r.Get("model_type") != nullptr && c->model_type.empty()) {
    return r.Error("model_type", "is empty (expected llama, mistral or qwen2)");
  }
  if (c->architecture.empty()) {
    for (const Family& f : kFamilies) {
      if (c->model_type == f.model_type) *family = &f;
    }
    if (*family == nullptr) {
      const std::string supported = absl::StrCat(
          " (supported model types: llama, mistral, qwen2; architectures: ", SupportedArchitectures(), ")");
      if (c->model_type.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ": fields 'architectures' and 'model_type' are both missing", supported));
      }
      return r.Error("model_type", absl::StrCat("unsupported model type '", c->model_type,
                                                "' and no architectures given", supported));
    }
    c->architecture = absl::StrCat((*family)->prefix, kCausalLm);
  } else {
    for (const Family& f : kFamilies) {
      if (c->architecture == absl::StrCat(f.prefix, kCausalLm) ||
          c->architecture == absl::StrCat(f.prefix, kSeqCls)) {
        *family = &f;
      }
    }
    if (*family == nullptr) {
      return r.Error("architectures", absl::StrCat("unsupported architecture '", c->architecture,
                                                   "' (supported: ", SupportedArchitectures(), ")"));
    }
    if (!c->model_type.empty() && c->model_type != (*family)->model_type) {
      return r.Error("model_type",
                     absl::StrCat("'", c->model_type, "' does not match architecture '", c->architecture,
                                  "' (expects '", (*family)->model_type, "')"));
    }
  }
  c->model_type = (*family)->model_type;
  return absl::OkStatus();
}

// The dimensions (required) and the heads' layout.
absl::Status ParseShapes(const FieldReader& r, const Family& family, HfModelConfig* c) {
  // Shapes. The dimensions are required: the families' class defaults describe 7B models, and silently
  // building one because a field is missing would be worse than an error.
  ZF_RETURN_IF_ERROR(r.RequiredPositive("vocab_size", kMaxVocab, &c->vocab_size));
  ZF_RETURN_IF_ERROR(r.RequiredPositive("hidden_size", kMaxHidden, &c->hidden_size));
  ZF_RETURN_IF_ERROR(r.RequiredPositive("intermediate_size", kMaxIntermediate, &c->intermediate_size));
  ZF_RETURN_IF_ERROR(r.RequiredPositive("num_hidden_layers", kMaxLayers, &c->num_hidden_layers));
  ZF_RETURN_IF_ERROR(r.RequiredPositive("num_attention_heads", kMaxHeads, &c->num_attention_heads));
  c->num_key_value_heads = c->num_attention_heads;
  ZF_RETURN_IF_ERROR(r.OptionalPositive("num_key_value_heads", kMaxHeads, &c->num_key_value_heads));
  if (c->num_attention_heads % c->num_key_value_heads != 0) {
    return r.Error("num_key_value_heads",
                   absl::StrCat(c->num_key_value_heads, " does not divide num_attention_heads ",
                                c->num_attention_heads));
  }
  if (r.Get("head_dim") != nullptr) {
    ZF_RETURN_IF_ERROR(r.OptionalPositive("head_dim", kMaxHeadDim, &c->head_dim));
  } else {
    if (c->hidden_size % c->num_attention_heads != 0) {
      return r.Error("num_attention_heads",
                     absl::StrCat(c->num_attention_heads, " does not divide hidden_size ", c->hidden_size,
                                  " (and no head_dim is given)"));
    }
    c->head_dim = c->hidden_size / c->num_attention_heads;
  }
  c->max_position_embeddings = family.default_max_position_embeddings;
  ZF_RETURN_IF_ERROR(
      r.OptionalPositive("max_position_embeddings", kMaxPositions, &c->max_position_embeddings));
  return absl::OkStatus();
}

// Norm epsilon, RoPE and the activation.
absl::Status ParseNumerics(const FieldReader& r, const std::string& source, HfModelConfig* c) {
  c->rms_norm_eps = 1e-6;
  ZF_RETURN_IF_ERROR(r.OptionalPositiveDouble("rms_norm_eps", &c->rms_norm_eps));
  ZF_RETURN_IF_ERROR(ParseRope(r, source, c));
  std::string act = "silu";
  ZF_RETURN_IF_ERROR(r.OptionalString("hidden_act", &act));
  if (act != "silu") {
    return absl::UnimplementedError(
        absl::StrCat(source, ": field 'hidden_act': '", act, "' is not supported (the model uses silu)"));
  }
  return absl::OkStatus();
}

// Weights present or shared: tied embeddings and the projections' biases, per family.
absl::Status ParseBiases(const FieldReader& r, const std::string& source, HfModelConfig* c) {
  c->tie_word_embeddings = false;
  ZF_RETURN_IF_ERROR(r.OptionalBool("tie_word_embeddings", &c->tie_word_embeddings));
  if (c->model_type == "qwen2") {
    // transformers' Qwen2 always builds q/k/v biases and has no such field; an explicit value is still
    // honoured so a hand-written config can describe a bias-free variant.
    c->attention_bias = true;
    ZF_RETURN_IF_ERROR(r.OptionalBool("attention_bias", &c->attention_bias));
  } else if (c->model_type == "llama") {
    c->attention_bias = false;
    ZF_RETURN_IF_ERROR(r.OptionalBool("attention_bias", &c->attention_bias));
    bool mlp_bias = false;
    ZF_RETURN_IF_ERROR(r.OptionalBool("mlp_bias", &mlp_bias));
    if (mlp_bias) {
      return absl::UnimplementedError(absl::StrCat(source, ": field 'mlp_bias': true is not supported"));
    }
  } else {
    c->attention_bias = false;  // MistralConfig has no such field; the projections never have a bias
  }
  return absl::OkStatus();
}

// transformers 5 writes each layer's attention as "layer_types" (Qwen2: "sliding_attention" from layer
// max_window_layers on, when use_sliding_window is true), and its models follow that list. zerofit applies
// one kind to every layer: a list of one kind decides whether the window applies, a mixed list is refused.
absl::Status ParseLayerTypes(const FieldReader& r, HfModelConfig* c) {
  const Json* types = r.Get("layer_types");
  if (types == nullptr) return absl::OkStatus();
  if (!types->is_array()) return r.TypeError("layer_types", "a list of strings", *types);
  if (static_cast<int64_t>(types->size()) != c->num_hidden_layers) {
    return r.Error("layer_types", absl::StrCat("has ", types->size(), " entries for ", c->num_hidden_layers,
                                               " layers (num_hidden_layers)"));
  }
  size_t sliding = 0;
  for (const Json& t : *types) {
    if (!t.is_string() || (t != "full_attention" && t != "sliding_attention")) {
      return r.Error("layer_types", absl::StrCat("entry ", JsonExcerpt(t),
                                                 " is not \"full_attention\" or \"sliding_attention\""));
    }
    sliding += t == "sliding_attention" ? 1 : 0;
  }
  if (sliding == 0) {
    c->sliding_window.reset();
  } else if (sliding != types->size()) {
    return absl::UnimplementedError(absl::StrCat(
        r.Error("layer_types", "").message(), sliding, " of ", types->size(),
        " layers use a sliding window and the others full attention; zerofit applies one kind to all"));
  } else if (!c->sliding_window) {
    return r.Error("layer_types", "says sliding_attention but the config gives no sliding_window");
  }
  return absl::OkStatus();
}

// Sliding window: MistralConfig defaults to 4096 (null disables it); Qwen2 uses it only when
// use_sliding_window is true, as transformers does.
absl::Status ParseSlidingWindow(const FieldReader& r, const Json& j, HfModelConfig* c) {
  if (c->model_type == "mistral") {
    const auto it = j.find("sliding_window");
    if (it == j.end()) {
      c->sliding_window = 4096;
    } else if (!it->is_null()) {
      int64_t w = 0;
      ZF_RETURN_IF_ERROR(r.OptionalPositive("sliding_window", kMaxPositions, &w));
      c->sliding_window = w;
    }
  } else if (c->model_type == "qwen2") {
    bool use = false;
    ZF_RETURN_IF_ERROR(r.OptionalBool("use_sliding_window", &use));
    if (use) {
      int64_t w = 4096;
      ZF_RETURN_IF_ERROR(r.OptionalPositive("sliding_window", kMaxPositions, &w));
      c->sliding_window = w;
    }
  }
  return ParseLayerTypes(r, c);
}

// Labels, as PretrainedConfig counts them: id2label wins, then num_labels, then 2.
absl::Status ParseLabels(const FieldReader& r, HfModelConfig* c) {
  c->num_labels = 2;
  if (const Json* id2label = r.Get("id2label")) {
    if (!id2label->is_object()) return r.TypeError("id2label", "an object", *id2label);
    if (id2label->empty()) return r.Error("id2label", "is empty");
    if (id2label->size() > static_cast<size_t>(kMaxLabels)) {
      return r.Error("id2label", absl::StrCat(id2label->size(), " labels exceed the limit of ", kMaxLabels));
    }
    c->num_labels = static_cast<int64_t>(id2label->size());
    int64_t n = c->num_labels;
    ZF_RETURN_IF_ERROR(r.OptionalPositive("num_labels", kMaxLabels, &n));
    if (n != c->num_labels) {
      return r.Error("num_labels",
                     absl::StrCat(n, " disagrees with id2label, which has ", c->num_labels, " entries"));
    }
  } else {
    ZF_RETURN_IF_ERROR(r.OptionalPositive("num_labels", kMaxLabels, &c->num_labels));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<HfModelConfig> ParseHfConfig(const std::string& json_text, const std::string& source) {
  ZF_RETURN_IF_ERROR(CheckJsonDepth(json_text, kMaxJsonDepth, source));
  Json j;
  // nlohmann reports parse errors by exception; translated here, where the library is called (STYLE 2).
  try {
    j = Json::parse(json_text);
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not valid JSON: ", e.what()));
  }
  if (!j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": expected a JSON object, got ", j.type_name()));
  }
  const FieldReader r(j, source);
  HfModelConfig c;
  const Family* family = nullptr;
  ZF_RETURN_IF_ERROR(ParseFamily(r, source, &c, &family));
  ZF_RETURN_IF_ERROR(ParseShapes(r, *family, &c));
  ZF_RETURN_IF_ERROR(ParseNumerics(r, source, &c));
  ZF_RETURN_IF_ERROR(ParseBiases(r, source, &c));
  ZF_RETURN_IF_ERROR(ParseSlidingWindow(r, j, &c));
  ZF_RETURN_IF_ERROR(ParseLabels(r, &c));
  ZF_RETURN_IF_ERROR(
      r.OptionalTokenId("pad_token_id", c.vocab_size, &c.pad_token_id, /*minus_one_is_none=*/true));
  ZF_RETURN_IF_ERROR(r.OptionalTokenId("bos_token_id", c.vocab_size, &c.bos_token_id));
  ZF_RETURN_IF_ERROR(r.OptionalTokenId("eos_token_id", c.vocab_size, &c.eos_token_id,
                                       /*minus_one_is_none=*/false, &c.more_eos_token_ids));
  ZF_RETURN_IF_ERROR(CheckUnusedFields(r));
  // transformers >= 4.56 writes "dtype"; earlier versions "torch_dtype".
  ZF_RETURN_IF_ERROR(
      r.OptionalString(r.Get("torch_dtype") != nullptr ? "torch_dtype" : "dtype", &c.torch_dtype));

  int64_t count = 0;
  if (!CountParameters(c, &count)) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": the parameter count of these dimensions overflows 64 bits"));
  }
  return c;
}

absl::StatusOr<HfModelConfig> LoadHfConfig(const std::string& path) {
  struct stat st;
  std::string file = path;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) file = absl::StrCat(path, "/config.json");
  // The coordinator sizes jobs from a model path a client named: a FIFO or a device there must not block it.
  ZF_ASSIGN_OR_RETURN(const std::string text, ReadRegularFile(file, 64u << 20));
  return ParseHfConfig(text, file);
}

std::string HfConfigToJson(const HfModelConfig& c) {
  nlohmann::ordered_json j;
  j["architectures"] = {c.architecture};
  j["model_type"] = c.model_type;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  if (c.rope_scaling.has_value()) {
    const RopeScaling& rs = *c.rope_scaling;
    nlohmann::ordered_json s;
    // Both keys: "rope_type" for current transformers, "type" for versions before 4.43.
    s["rope_type"] = rs.type;
    s["type"] = rs.type;
    s["factor"] = rs.factor;
    if (rs.type == "llama3") {
      s["low_freq_factor"] = rs.low_freq_factor;
      s["high_freq_factor"] = rs.high_freq_factor;
      s["original_max_position_embeddings"] = rs.original_max_position_embeddings;
    }
    j["rope_scaling"] = std::move(s);
  } else {
    j["rope_scaling"] = nullptr;
  }
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["attention_bias"] = c.attention_bias;
  if (c.model_type == "llama") j["mlp_bias"] = false;
  if (c.model_type == "qwen2") {
    j["use_sliding_window"] = c.sliding_window.has_value();
    j["sliding_window"] = c.sliding_window.has_value() ? nlohmann::ordered_json(*c.sliding_window) : nullptr;
  } else if (c.model_type == "mistral") {
    j["sliding_window"] = c.sliding_window.has_value() ? nlohmann::ordered_json(*c.sliding_window) : nullptr;
  }
  if (c.is_sequence_classification()) {
    nlohmann::ordered_json id2label = nlohmann::ordered_json::object();
    nlohmann::ordered_json label2id = nlohmann::ordered_json::object();
    for (int64_t i = 0; i < c.num_labels; ++i) {
      const std::string label = absl::StrCat("LABEL_", i);
      id2label[std::to_string(i)] = label;
      label2id[label] = i;
    }
    j["num_labels"] = c.num_labels;
    j["id2label"] = std::move(id2label);
    j["label2id"] = std::move(label2id);
  }
  if (c.pad_token_id.has_value()) j["pad_token_id"] = *c.pad_token_id;
  if (c.bos_token_id.has_value()) j["bos_token_id"] = *c.bos_token_id;
  if (c.eos_token_id.has_value() && c.more_eos_token_ids.empty()) j["eos_token_id"] = *c.eos_token_id;
  if (c.eos_token_id.has_value() && !c.more_eos_token_ids.empty()) {
    nlohmann::ordered_json ids = nlohmann::ordered_json::array({*c.eos_token_id});
    for (int64_t id : c.more_eos_token_ids) ids.push_back(id);
    j["eos_token_id"] = std::move(ids);
  }
  if (!c.torch_dtype.empty()) j["torch_dtype"] = c.torch_dtype;
  // Names are plain ASCII here and torch_dtype came from valid JSON, so strict dumping cannot throw;
  // replace keeps that a guarantee for hand-built configs too.
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace zerofit::core
