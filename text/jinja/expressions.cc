// Expression evaluation of the Interpreter (statements are in jinja/interpreter.cc).
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/excerpt.h"
#include "core/status_macros.h"
#include "text/jinja/builtins.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/strings.h"

namespace zerofit::text {
namespace {

absl::Status At(const Expr& e, const absl::Status& s) {
  if (absl::StartsWith(s.message(), "chat_template:")) return s;
  return absl::Status(s.code(), absl::StrCat("chat_template:", e.line, ":", e.column, ": ", s.message()));
}

absl::Status Unsupported(const char* op, const Value& a, const Value& b) {
  return TypeError(absl::StrCat("unsupported operand type(s) for ", op, ": '", a.TypeName(), "' and '",
                                b.TypeName(), "'"));
}

// Python slice indices for a sequence of length n.
absl::StatusOr<std::vector<int64_t>> SliceIndices(int64_t n, const Value& start, const Value& stop,
                                                  const Value& step_v) {
  for (const Value* v : {&start, &stop, &step_v}) {
    if (!v->is_none() && !v->is_int() && !v->is_bool()) {
      return TypeError("slice indices must be integers or None");
    }
  }
  int64_t step = step_v.is_none() ? 1 : step_v.int_value();
  if (step == 0) return TypeError("slice step cannot be zero");
  int64_t lower = step > 0 ? 0 : -1;
  int64_t upper = step > 0 ? n : n - 1;
  auto clamp = [&](const Value& v, int64_t dflt) {
    if (v.is_none()) return dflt;
    int64_t i = v.int_value();
    if (i < 0) i += n;
    return std::max(lower, std::min(upper, i));
  };
  int64_t b = clamp(start, step > 0 ? lower : upper);
  int64_t e = clamp(stop, step > 0 ? upper : lower);
  std::vector<int64_t> out;
  for (int64_t i = b; step > 0 ? i < e : i > e; i += step) out.push_back(i);
  return out;
}

int64_t FloorMod(int64_t a, int64_t b) {
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

bool IsNumberOperator(const std::string& op) {
  return op == "+" || op == "-" || op == "*" || op == "/" || op == "//" || op == "%" || op == "**";
}

// x ** y for integers, y >= 0, refusing overflow (Python's integers are unbounded; ours are 64-bit).
absl::StatusOr<Value> IntPower(int64_t x, int64_t y) {
  int64_t acc = 1;
  bool overflow = false;
  for (int64_t i = 0; i < y && !overflow && acc != 0 && !(acc == 1 && x == 1); ++i) {
    overflow = __builtin_mul_overflow(acc, x, &acc);
  }
  if (overflow) return absl::OutOfRangeError(absl::StrCat("integer overflow in ", x, " ** ", y));
  return Value::Int(acc);
}

// A number operator (IsNumberOperator) on two numbers, with Python's semantics: ints stay ints (overflow is
// an error rather than a wrong result), / is true division, // and % floor, division by zero an error.
absl::StatusOr<Value> NumberArithmetic(const std::string& op, const Value& a, const Value& b) {
  const bool ints = !a.is_float() && !b.is_float();
  int64_t x = a.int_value(), y = b.int_value(), r = 0;
  const double fx = a.number(), fy = b.number();
  const absl::Status overflow =
      absl::OutOfRangeError(absl::StrCat("integer overflow in ", x, " ", op, " ", y));
  if (op == "+") {
    if (!ints) return Value::Float(fx + fy);
    return __builtin_add_overflow(x, y, &r) ? absl::StatusOr<Value>(overflow) : Value::Int(r);
  }
  if (op == "-") {
    if (!ints) return Value::Float(fx - fy);
    return __builtin_sub_overflow(x, y, &r) ? absl::StatusOr<Value>(overflow) : Value::Int(r);
  }
  if (op == "*") {
    if (!ints) return Value::Float(fx * fy);
    return __builtin_mul_overflow(x, y, &r) ? absl::StatusOr<Value>(overflow) : Value::Int(r);
  }
  if (op == "**")
    return ints && y >= 0 ? IntPower(x, y) : absl::StatusOr<Value>(Value::Float(std::pow(fx, fy)));
  if (fy == 0) return TypeError(op == "/" ? "division by zero" : "integer division or modulo by zero");
  if (op == "/") return Value::Float(fx / fy);
  if (op == "//") return ints ? Value::Int(FloorDiv(x, y)) : Value::Float(std::floor(fx / fy));
  if (ints) return Value::Int(FloorMod(x, y));  // %
  const double m = std::fmod(fx, fy);
  return Value::Float((m != 0 && ((m < 0) != (fy < 0))) ? m + fy : m);
}

// A string or list repeated `count` times (<= 0: empty), within the render limits.
absl::StatusOr<Value> Repeat(const Value& seq, int64_t count, const RenderLimits& limits) {
  count = std::max<int64_t>(0, count);
  const size_t unit = seq.is_string() ? seq.str().size() : seq.list().size();
  const size_t limit = seq.is_string() ? limits.max_output_bytes : limits.max_range;
  if (unit != 0 && static_cast<size_t>(count) > limit / unit) {
    return absl::ResourceExhaustedError("sequence repetition is too long");
  }
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < count; ++i) out += seq.str();
    return Value::String(std::move(out));
  }
  std::vector<Value> out;
  for (int64_t i = 0; i < count; ++i) out.insert(out.end(), seq.list().begin(), seq.list().end());
  return Value::List(std::move(out), seq.is_tuple());
}

}  // namespace

absl::StatusOr<Value> Interpreter::Eval(const Expr& e, const FramePtr& frame) {
  absl::StatusOr<Value> v = [&]() -> absl::StatusOr<Value> {
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return e.literal;
      case Expr::Kind::kName: {
        const Value* v = frame->Find(e.name);
        return v ? *v : Value::Undefined(absl::StrCat("'", core::Excerpt(e.name), "' is undefined"));
      }
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        std::vector<Value> items;
        for (const auto& c : e.children) {
          ZF_ASSIGN_OR_RETURN(Value item, Eval(*c, frame));
          items.push_back(std::move(item));
        }
        return Value::List(std::move(items), e.kind == Expr::Kind::kTuple);
      }
      case Expr::Kind::kDict: {
        Value d = Value::Dict();
        for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
          ZF_ASSIGN_OR_RETURN(Value key, Eval(*e.children[i], frame));
          if (!key.is_string()) return TypeError("unsupported: dict literal keys must be strings");
          ZF_ASSIGN_OR_RETURN(Value value, Eval(*e.children[i + 1], frame));
          d.mutable_dict().Set(key.str(), std::move(value));
        }
        return d;
      }
      case Expr::Kind::kGetAttr: {
        ZF_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0], frame));
        return GetAttribute(obj, e.name);
      }
      case Expr::Kind::kGetItem:
        return EvalGetItem(e, frame);
      case Expr::Kind::kSlice:
        return EvalSlice(e, frame);
      case Expr::Kind::kCall:
        return EvalCall(e, frame, nullptr);
      case Expr::Kind::kFilter:
        return EvalFilter(e, frame, nullptr);
      case Expr::Kind::kTest:
        return EvalTest(e, frame);
      case Expr::Kind::kUnary: {
        ZF_ASSIGN_OR_RETURN(Value v, Eval(*e.children[0], frame));
        if (e.name == "not") return Value::Bool(!v.Truthy());
        if (v.is_undefined()) return UndefinedError(v);
        if (!v.is_number())
          return TypeError(absl::StrCat("bad operand type for unary ", e.name, ": '", v.TypeName(), "'"));
        if (e.name == "+") return v.is_float() ? v : Value::Int(v.int_value());
        return v.is_float() ? Value::Float(-v.number()) : Value::Int(-v.int_value());
      }
      case Expr::Kind::kBinary:
        return EvalBinary(e, frame);
      case Expr::Kind::kCompare:
        return EvalCompare(e, frame);
      case Expr::Kind::kCond: {
        ZF_ASSIGN_OR_RETURN(Value cond, Eval(*e.children[1], frame));
        if (cond.Truthy()) return Eval(*e.children[0], frame);
        if (e.children[2]) return Eval(*e.children[2], frame);
        return Value::Undefined(
            "the inline if-expression evaluated to false and no else section was defined.");
      }
    }
    return TypeError("unknown expression");
  }();
  if (!v.ok()) return At(e, v.status());
  return v;
}

absl::StatusOr<Value> Interpreter::EvalBinary(const Expr& e, const FramePtr& frame) {
  ZF_ASSIGN_OR_RETURN(Value a, Eval(*e.children[0], frame));
  if (e.name == "and" || e.name == "or") {
    if (a.Truthy() == (e.name == "or")) return a;
    return Eval(*e.children[1], frame);
  }
  ZF_ASSIGN_OR_RETURN(Value b, Eval(*e.children[1], frame));
  if (e.name == "~") {
    std::string s = a.ToString() + b.ToString();
    if (s.size() > limits_.max_output_bytes) return absl::ResourceExhaustedError("string too long");
    return Value::String(std::move(s));
  }
  return Arithmetic(e.name, a, b);
}

absl::StatusOr<Value> Interpreter::Arithmetic(const std::string& op, const Value& a, const Value& b) const {
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  if (a.is_number() && b.is_number() && IsNumberOperator(op)) return NumberArithmetic(op, a, b);
  if (op == "+" && a.is_string() && b.is_string()) {
    if (a.str().size() + b.str().size() > limits_.max_output_bytes) {
      return absl::ResourceExhaustedError("string concatenation is too long");
    }
    return Value::String(a.str() + b.str());
  }
  if (op == "+" && a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    if (a.list().size() + b.list().size() > limits_.max_range) {
      return absl::ResourceExhaustedError("list concatenation is too long");
    }
    std::vector<Value> items = a.list();
    items.insert(items.end(), b.list().begin(), b.list().end());
    return Value::List(std::move(items), a.is_tuple());
  }
  if (op == "+" && (a.is_string() || a.is_list())) {
    return TypeError(absl::StrCat("can only concatenate ", a.TypeName(), " (not \"", b.TypeName(), "\") to ",
                                  a.TypeName()));
  }
  const bool a_seq = a.is_string() || a.is_list(), b_seq = b.is_string() || b.is_list();
  if (op == "*" && a_seq != b_seq && ((a_seq ? b : a).is_int() || (a_seq ? b : a).is_bool())) {
    return Repeat(a_seq ? a : b, (a_seq ? b : a).int_value(), limits_);
  }
  if (op == "%" && a.is_string()) {
    ZF_ASSIGN_OR_RETURN(std::string s, PercentFormat(a.str(), b));
    return Value::String(std::move(s));
  }
  return Unsupported(op.c_str(), a, b);
}

absl::StatusOr<Value> Interpreter::EvalCompare(const Expr& e, const FramePtr& frame) {
  ZF_ASSIGN_OR_RETURN(Value left, Eval(*e.children[0], frame));
  for (size_t i = 0; i < e.ops.size(); ++i) {
    ZF_ASSIGN_OR_RETURN(Value right, Eval(*e.children[i + 1], frame));
    const std::string& op = e.ops[i];
    bool ok = false;
    if (op == "==" || op == "!=") {
      ok = ValuesEqual(left, right) == (op == "==");
    } else if (op == "in" || op == "not in") {
      ZF_ASSIGN_OR_RETURN(bool in, ValueContains(right, left));
      ok = in == (op == "in");
    } else {
      if (left.is_undefined()) return UndefinedError(left);
      if (right.is_undefined()) return UndefinedError(right);
      bool swap = op == ">" || op == "<=";
      auto lt = swap ? ValueLess(right, left) : ValueLess(left, right);
      if (!lt.ok()) {
        return TypeError(absl::StrCat("'", op, "' not supported between instances of '", left.TypeName(),
                                      "' and '", right.TypeName(), "'"));
      }
      ok = (op == "<" || op == ">") ? *lt : !*lt;
    }
    if (!ok) return Value::Bool(false);
    left = std::move(right);
  }
  return Value::Bool(true);
}

absl::StatusOr<Value> Interpreter::EvalGetItem(const Expr& e, const FramePtr& frame) {
  ZF_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0], frame));
  ZF_ASSIGN_OR_RETURN(Value key, Eval(*e.children[1], frame));
  if (obj.is_undefined()) return UndefinedError(obj);
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    if (obj.is_list()) {
      int64_t n = static_cast<int64_t>(obj.list().size());
      int64_t i = key.int_value() < 0 ? key.int_value() + n : key.int_value();
      if (i >= 0 && i < n) return obj.list()[static_cast<size_t>(i)];
    } else {
      std::u32string cps = DecodeUtf8(obj.str());
      int64_t n = static_cast<int64_t>(cps.size());
      int64_t i = key.int_value() < 0 ? key.int_value() + n : key.int_value();
      if (i >= 0 && i < n) return Value::String(EncodeUtf8(cps.substr(static_cast<size_t>(i), 1)));
    }
  }
  if (obj.is_dict() && key.is_string()) {
    if (const Value* v = obj.dict().Find(key.str())) return *v;
  }
  if (key.is_string()) return GetAttribute(obj, key.str());
  return Value::Undefined(absl::StrCat(obj.is_none() ? "None" : absl::StrCat(obj.TypeName(), " object"),
                                       " has no element ", key.Repr()));
}

absl::StatusOr<Value> Interpreter::EvalSlice(const Expr& e, const FramePtr& frame) {
  ZF_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0], frame));
  Value parts[3] = {Value::None(), Value::None(), Value::None()};
  for (int i = 0; i < 3; ++i) {
    if (e.children[i + 1]) {
      ZF_ASSIGN_OR_RETURN(parts[i], Eval(*e.children[i + 1], frame));
    }
  }
  if (obj.is_undefined()) return UndefinedError(obj);
  if (obj.is_list()) {
    ZF_ASSIGN_OR_RETURN(auto idx,
                        SliceIndices(static_cast<int64_t>(obj.list().size()), parts[0], parts[1], parts[2]));
    std::vector<Value> out;
    for (int64_t i : idx) out.push_back(obj.list()[static_cast<size_t>(i)]);
    return Value::List(std::move(out), obj.is_tuple());
  }
  if (obj.is_string()) {
    std::u32string cps = DecodeUtf8(obj.str());
    ZF_ASSIGN_OR_RETURN(auto idx,
                        SliceIndices(static_cast<int64_t>(cps.size()), parts[0], parts[1], parts[2]));
    std::u32string out;
    for (int64_t i : idx) out.push_back(cps[static_cast<size_t>(i)]);
    return Value::String(EncodeUtf8(out));
  }
  return Value::Undefined(absl::StrCat(obj.TypeName(), " object is not subscriptable"));
}

absl::StatusOr<CallArgs> Interpreter::EvalArgs(const Expr& e, size_t first_child, const FramePtr& frame) {
  CallArgs args;
  for (size_t i = first_child; i < e.children.size(); ++i) {
    ZF_ASSIGN_OR_RETURN(Value v, Eval(*e.children[i], frame));
    args.args.push_back(std::move(v));
  }
  for (const auto& [k, expr] : e.kwargs) {
    ZF_ASSIGN_OR_RETURN(Value v, Eval(*expr, frame));
    args.kwargs.emplace_back(k, std::move(v));
  }
  return args;
}

absl::StatusOr<Value> Interpreter::EvalCall(const Expr& e, const FramePtr& frame, const Value* caller) {
  ZF_ASSIGN_OR_RETURN(Value callee, Eval(*e.children[0], frame));
  ZF_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1, frame));
  if (callee.is_undefined()) return UndefinedError(callee);
  if (!callee.is_callable())
    return TypeError(absl::StrCat("'", callee.TypeName(), "' object is not callable"));
  if (caller != nullptr) args.kwargs.emplace_back("caller", *caller);
  auto result = callee.function()(args);
  if (!result.ok()) return At(e, result.status());
  ZF_RETURN_IF_ERROR(CheckResultSize(e, *result));
  return result;
}

absl::Status Interpreter::CheckResultSize(const Expr& e, const Value& v) const {
  if (v.is_string() && v.str().size() > limits_.max_output_bytes) {
    return At(e, absl::ResourceExhaustedError(absl::StrCat("a string of ", v.str().size(),
                                                           " bytes is larger than the output limit ",
                                                           limits_.max_output_bytes)));
  }
  return absl::OkStatus();
}

absl::StatusOr<Value> Interpreter::EvalFilter(const Expr& e, const FramePtr& frame,
                                              const Value* block_input) {
  Value input;
  const Expr* inner = e.children[0].get();
  if (inner == nullptr) {
    input = *block_input;
  } else if (inner->kind == Expr::Kind::kFilter && block_input != nullptr) {
    ZF_ASSIGN_OR_RETURN(input, EvalFilter(*inner, frame, block_input));
  } else {
    ZF_ASSIGN_OR_RETURN(input, Eval(*inner, frame));
  }
  ZF_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1, frame));
  auto result = ApplyFilter(e.name, input, args);
  if (!result.ok()) return At(e, result.status());
  ZF_RETURN_IF_ERROR(CheckResultSize(e, *result));
  return result;
}

absl::StatusOr<Value> Interpreter::EvalTest(const Expr& e, const FramePtr& frame) {
  ZF_ASSIGN_OR_RETURN(Value input, Eval(*e.children[0], frame));
  ZF_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1, frame));
  auto result = ApplyTest(e.name, input, args);
  if (!result.ok()) return At(e, result.status());
  return Value::Bool(*result != e.negated);
}

}  // namespace zerofit::text
