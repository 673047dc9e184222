// Value: the dynamic value of the Jinja interpreter, modelled on the Python objects jinja2 works with.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace zerofit::text {

class Value;
struct ValueDict;

// Arguments of a call: positional, then keyword (in source order).
struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
};

using NativeFunction = std::function<absl::StatusOr<Value>(CallArgs&)>;

// A Python-like value. Lists, dicts and functions are shared by reference (copying a Value copies the
// reference, as Python does); strings, numbers and booleans are values. Strings are UTF-8.
// Undefined is jinja2's default Undefined: it prints as "", is falsy, iterates as empty, and carries the
// message jinja2 raises when it is used further ("'x' is undefined", "dict object has no attribute 'y'").
class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction };

  Value() = default;  // undefined without a hint
  static Value Undefined(std::string message);
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double f);
  static Value String(std::string s);
  // `tuple` only changes how the list prints: (1, 2) instead of [1, 2].
  static Value List(std::vector<Value> items, bool tuple = false);
  static Value Dict();
  // A namespace() object: a dict whose entries are read and assigned as attributes.
  static Value Namespace();
  static Value Function(std::string name, NativeFunction fn);
  // A tuple whose items are also attributes (Python's namedtuple; groupby's (grouper, list)).
  // Precondition: names.size() == items.size().
  static Value NamedTuple(std::vector<std::string> names, std::vector<Value> items);

  // Makes a dict callable as well (jinja2's loop object in a recursive for loop: loop(children)).
  void SetCall(NativeFunction fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  // Python numbers: int, float and bool (bool is an int subclass).
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kList && tuple_; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kDict && namespace_; }
  bool is_function() const { return kind_ == Kind::kFunction; }
  // A function, or a dict made callable with SetCall.
  bool is_callable() const { return fn_ != nullptr; }

  bool bool_value() const { return b_; }
  int64_t int_value() const { return is_bool() ? (b_ ? 1 : 0) : i_; }
  // int, bool or float as a double.
  double number() const { return is_float() ? f_ : static_cast<double>(int_value()); }
  // The string; for undefined the error message; for a function its name.
  const std::string& str() const { return s_; }
  const std::vector<Value>& list() const { return *list_; }
  std::vector<Value>& mutable_list() { return *list_; }
  const ValueDict& dict() const { return *dict_; }
  ValueDict& mutable_dict() { return *dict_; }
  // Precondition: is_callable().
  const NativeFunction& function() const { return *fn_; }
  // The value of a named tuple's field `name`; null for other values and unknown names.
  const Value* Field(const std::string& name) const;

  // Python truthiness (undefined is false).
  bool Truthy() const;
  // Python str(): None, True, 1.5, 'quoted' strings inside containers; undefined prints as "".
  std::string ToString() const;
  // Python repr().
  std::string Repr() const;
  // The type name jinja2 uses in messages: "str", "int", "dict", "list", ...
  std::string TypeName() const;
  // The identity of a shared container (for `is sameas`); null for scalars.
  const void* identity() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  bool tuple_ = false;
  bool namespace_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<std::vector<Value>> list_;
  std::shared_ptr<ValueDict> dict_;
  std::shared_ptr<NativeFunction> fn_;
  std::shared_ptr<const std::vector<std::string>> field_names_;  // named tuples only
};

// An insertion-ordered dict with string keys (JSON objects and template dict literals).
struct ValueDict {
  std::vector<std::pair<std::string, Value>> items;

  // Null when absent.
  const Value* Find(const std::string& key) const;
  // Inserts or replaces, keeping the first insertion's position as Python does.
  void Set(const std::string& key, Value value);
};

// Python ==, including 1 == 1.0 == True and deep comparison of lists and dicts.
bool ValuesEqual(const Value& a, const Value& b);
// Python <: numbers with numbers, strings with strings, lists element-wise; else a TypeError message.
absl::StatusOr<bool> ValueLess(const Value& a, const Value& b);
// Python repr() of a float ("1.0", "1e+20", "1e-05", "inf").
std::string FormatPythonFloat(double f);
// Python repr() of a str: single quotes unless the text has ' and no ".
std::string PythonStringRepr(const std::string& s);

// jinja2's TypeError (an operation on values of the wrong type) as a Status.
inline absl::Status TypeError(absl::string_view message) { return absl::InvalidArgumentError(message); }

}  // namespace zerofit::text
