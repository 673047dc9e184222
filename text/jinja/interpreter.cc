#include "text/jinja/interpreter.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/excerpt.h"
#include "core/status_macros.h"
#include "text/jinja/builtins.h"
#include "text/jinja/strings.h"

namespace zerofit::text {

const Value* Interpreter::Frame::Find(const std::string& name) const {
  for (const Frame* f = this; f != nullptr; f = f->parent.get()) {
    for (const auto& [k, v] : f->vars) {
      if (k == name) return &v;
    }
  }
  return nullptr;
}

void Interpreter::Frame::Set(const std::string& name, Value value) {
  for (auto& [k, v] : vars) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  vars.emplace_back(name, std::move(value));
}

namespace {

// Adds "chat_template:LINE:COL: " unless an inner node already named a position.
absl::Status At(int line, int column, const absl::Status& s) {
  if (absl::StartsWith(s.message(), "chat_template:")) return s;
  return absl::Status(s.code(), absl::StrCat("chat_template:", line, ":", column, ": ", s.message()));
}

}  // namespace

absl::StatusOr<std::string> Interpreter::Render(const NodeList& nodes,
                                                std::vector<std::pair<std::string, Value>> globals) {
  auto root = std::make_shared<Frame>();
  root->vars = Builtins();
  for (auto& [k, v] : globals) root->Set(k, std::move(v));
  std::string out;
  ZF_ASSIGN_OR_RETURN(Flow flow, Exec(nodes, root, &out));
  (void)flow;  // break/continue outside a loop are parse errors: the top level ends with kNormal
  return out;
}

std::vector<std::pair<std::string, Value>> Interpreter::Builtins() const {
  std::vector<std::pair<std::string, Value>> b;
  size_t max_range = limits_.max_range;
  b.emplace_back("range", Value::Function("range", [max_range](CallArgs& a) -> absl::StatusOr<Value> {
                   if (a.args.empty() || a.args.size() > 3)
                     return TypeError("range expected 1 to 3 arguments");
                   for (const Value& v : a.args) {
                     if (!v.is_int() && !v.is_bool()) return TypeError("range() arguments must be integers");
                   }
                   int64_t start = a.args.size() > 1 ? a.args[0].int_value() : 0;
                   int64_t stop = a.args.size() > 1 ? a.args[1].int_value() : a.args[0].int_value();
                   int64_t step = a.args.size() > 2 ? a.args[2].int_value() : 1;
                   if (step == 0) return TypeError("range() arg 3 must not be zero");
                   std::vector<Value> out;
                   for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
                     if (out.size() >= max_range) return TypeError("range() is too long");
                     out.push_back(Value::Int(i));
                   }
                   return Value::List(std::move(out));
                 }));
  auto make_dict = [](bool ns) {
    return [ns](CallArgs& a) -> absl::StatusOr<Value> {
      Value d = ns ? Value::Namespace() : Value::Dict();
      for (const Value& init : a.args) {
        if (!init.is_dict()) return TypeError("namespace()/dict() positional arguments must be mappings");
        for (const auto& [k, v] : init.dict().items) d.mutable_dict().Set(k, v);
      }
      for (auto& [k, v] : a.kwargs) d.mutable_dict().Set(k, v);
      return d;
    };
  };
  b.emplace_back("namespace", Value::Function("namespace", make_dict(true)));
  b.emplace_back("dict", Value::Function("dict", make_dict(false)));
  return b;
}

absl::Status Interpreter::Step() {
  if (++steps_ > limits_.max_steps) {
    return absl::ResourceExhaustedError(
        absl::StrCat("chat template takes more than ", limits_.max_steps, " steps"));
  }
  return absl::OkStatus();
}

Interpreter::FramePtr Interpreter::ChildScope(const FramePtr& parent) {
  auto frame = std::make_shared<Frame>();
  frame->parent = parent;
  return frame;
}

absl::Status Interpreter::Append(std::string* out, std::string_view text) const {
  if (out->size() + text.size() > limits_.max_output_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("chat template output exceeds ", limits_.max_output_bytes, " bytes"));
  }
  out->append(text);
  return absl::OkStatus();
}

absl::StatusOr<std::string> Interpreter::Capture(const NodeList& body, const FramePtr& frame) {
  std::string out;
  ZF_ASSIGN_OR_RETURN(Flow flow, Exec(body, frame, &out));
  (void)flow;
  return out;
}

absl::StatusOr<Interpreter::Flow> Interpreter::Exec(const NodeList& nodes, const FramePtr& frame,
                                                    std::string* out) {
  for (const auto& node : nodes) {
    ZF_RETURN_IF_ERROR(Step());
    auto flow = ExecNode(*node, frame, out);
    if (!flow.ok()) return At(node->line, node->column, flow.status());
    if (*flow != Flow::kNormal) return *flow;
  }
  return Flow::kNormal;
}

absl::StatusOr<Interpreter::Flow> Interpreter::ExecNode(const Node& node, const FramePtr& frame,
                                                        std::string* out) {
  switch (node.kind) {
    case Node::Kind::kText:
      ZF_RETURN_IF_ERROR(Append(out, node.text));
      return Flow::kNormal;
    case Node::Kind::kOutput: {
      ZF_ASSIGN_OR_RETURN(Value v, Eval(*node.expr, frame));
      ZF_RETURN_IF_ERROR(Append(out, v.ToString()));
      return Flow::kNormal;
    }
    case Node::Kind::kIf:
      return ExecIf(node, frame, out);
    case Node::Kind::kFor:
      return ExecFor(node, frame, out);
    case Node::Kind::kSet:
      ZF_RETURN_IF_ERROR(ExecSet(node, frame));
      return Flow::kNormal;
    case Node::Kind::kSetBlock: {  // the body has its own scope, as in jinja2
      ZF_ASSIGN_OR_RETURN(std::string text, Capture(node.body, ChildScope(frame)));
      frame->Set(node.targets[0], Value::String(std::move(text)));
      return Flow::kNormal;
    }
    case Node::Kind::kMacro:
      frame->Set(node.name, MakeMacro(node, frame));
      return Flow::kNormal;
    case Node::Kind::kCallBlock:
      ZF_RETURN_IF_ERROR(ExecCallBlock(node, frame, out));
      return Flow::kNormal;
    case Node::Kind::kFilterBlock: {
      ZF_ASSIGN_OR_RETURN(std::string text, Capture(node.body, ChildScope(frame)));
      Value input = Value::String(std::move(text));
      ZF_ASSIGN_OR_RETURN(Value v, EvalFilter(*node.expr, frame, &input));
      ZF_RETURN_IF_ERROR(Append(out, v.ToString()));
      return Flow::kNormal;
    }
    case Node::Kind::kGeneration: {  // a CallBlock in transformers: the body is a macro with its own scope
      ZF_ASSIGN_OR_RETURN(std::string text, Capture(node.body, ChildScope(frame)));
      ZF_RETURN_IF_ERROR(Append(out, text));
      return Flow::kNormal;
    }
    case Node::Kind::kWith: {  // values come from the outer scope, then bind in a new one
      std::vector<Value> values;
      for (const auto& e : node.defaults) {
        ZF_ASSIGN_OR_RETURN(Value v, Eval(*e, frame));
        values.push_back(std::move(v));
      }
      FramePtr scope = ChildScope(frame);
      for (size_t i = 0; i < values.size(); ++i) scope->Set(node.params[i], std::move(values[i]));
      return Exec(node.body, scope, out);
    }
    case Node::Kind::kBreak:
      return Flow::kBreak;
    case Node::Kind::kContinue:
      return Flow::kContinue;
  }
  return Flow::kNormal;
}

absl::StatusOr<Interpreter::Flow> Interpreter::ExecIf(const Node& node, const FramePtr& frame,
                                                      std::string* out) {
  for (const auto& [cond, body] : node.branches) {
    bool take = true;
    if (cond) {
      ZF_ASSIGN_OR_RETURN(Value v, Eval(*cond, frame));
      take = v.Truthy();
    }
    if (take) return Exec(body, frame, out);
  }
  return Flow::kNormal;
}

namespace {

absl::Status BindTargets(const std::vector<std::string>& targets, const Value& item,
                         const std::function<void(const std::string&, Value)>& set) {
  if (targets.size() == 1) {
    set(targets[0], item);
    return absl::OkStatus();
  }
  auto items = IterateValue(item);
  if (!items.ok()) return TypeError(absl::StrCat("cannot unpack non-iterable ", item.TypeName(), " object"));
  if (items->size() != targets.size()) {
    return TypeError(absl::StrCat("expected ", targets.size(), " values to unpack, got ", items->size()));
  }
  for (size_t i = 0; i < targets.size(); ++i) set(targets[i], (*items)[i]);
  return absl::OkStatus();
}

// jinja2's `loop` object for iteration i of n, `depth0` recursive calls down.
Value LoopObject(const std::vector<Value>& items, size_t i, int64_t depth0) {
  const int64_t n = static_cast<int64_t>(items.size());
  const int64_t k = static_cast<int64_t>(i);
  Value loop = Value::Dict();
  ValueDict& d = loop.mutable_dict();
  d.Set("index", Value::Int(k + 1));
  d.Set("index0", Value::Int(k));
  d.Set("revindex", Value::Int(n - k));
  d.Set("revindex0", Value::Int(n - k - 1));
  d.Set("first", Value::Bool(k == 0));
  d.Set("last", Value::Bool(k == n - 1));
  d.Set("length", Value::Int(n));
  d.Set("depth", Value::Int(depth0 + 1));
  d.Set("depth0", Value::Int(depth0));
  if (i > 0) d.Set("previtem", items[i - 1]);
  if (i + 1 < items.size()) d.Set("nextitem", items[i + 1]);
  d.Set("cycle", Value::Function("cycle", [k](CallArgs& a) -> absl::StatusOr<Value> {
          if (a.args.empty()) return TypeError("no items for cycling given");
          return a.args[static_cast<size_t>(k) % a.args.size()];
        }));
  return loop;
}

}  // namespace

absl::StatusOr<Interpreter::Flow> Interpreter::ExecFor(const Node& node, const FramePtr& frame,
                                                       std::string* out) {
  ZF_ASSIGN_OR_RETURN(Value iterable, Eval(*node.expr, frame));
  return ExecLoop(node, frame, iterable, /*depth0=*/0, out);
}

absl::StatusOr<Interpreter::Flow> Interpreter::ExecLoop(const Node& node, const FramePtr& frame,
                                                        const Value& iterable, int64_t depth0,
                                                        std::string* out) {
  ZF_ASSIGN_OR_RETURN(std::vector<Value> items, IterateValue(iterable));
  auto bind_into = [&](const FramePtr& f, const Value& item) {
    return BindTargets(node.targets, item, [&](const std::string& k, Value v) { f->Set(k, std::move(v)); });
  };
  if (node.cond) {  // `for x in xs if cond`: filter first, so loop.length counts the kept items
    std::vector<Value> kept;
    for (const Value& item : items) {
      ZF_RETURN_IF_ERROR(Step());
      FramePtr scratch = ChildScope(frame);
      ZF_RETURN_IF_ERROR(bind_into(scratch, item));
      ZF_ASSIGN_OR_RETURN(Value keep, Eval(*node.cond, scratch));
      if (keep.Truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) return Exec(node.else_body, frame, out);
  const NativeFunction recurse = RecursiveLoopCall(node, frame, depth0);
  for (size_t i = 0; i < items.size(); ++i) {
    ZF_RETURN_IF_ERROR(Step());
    FramePtr iteration = ChildScope(frame);
    ZF_RETURN_IF_ERROR(bind_into(iteration, items[i]));
    Value loop = LoopObject(items, i, depth0);
    loop.SetCall(recurse);
    iteration->Set("loop", std::move(loop));
    ZF_ASSIGN_OR_RETURN(Flow flow, Exec(node.body, iteration, out));
    if (flow == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

NativeFunction Interpreter::RecursiveLoopCall(const Node& node, const FramePtr& frame, int64_t depth0) {
  if (!node.recursive) {
    return [](CallArgs&) -> absl::StatusOr<Value> {
      return TypeError("The loop must have the 'recursive' marker to be called recursively.");
    };
  }
  // Weak for the same reason as in MakeMacro: the loop object may be stored where it outlives the frame.
  std::weak_ptr<Frame> scope = frame;
  return [this, &node, scope, depth0](CallArgs& args) -> absl::StatusOr<Value> {
    FramePtr f = scope.lock();
    if (!f) return TypeError("loop() is called outside its loop");
    if (args.args.size() != 1 || !args.kwargs.empty()) {
      return TypeError("loop() takes exactly one argument, the iterable of the next level");
    }
    if (call_depth_ >= limits_.max_call_depth) {
      return absl::ResourceExhaustedError(
          absl::StrCat("recursive loop calls nest deeper than ", limits_.max_call_depth));
    }
    std::string text;
    ++call_depth_;
    auto flow = ExecLoop(node, f, args.args[0], depth0 + 1, &text);
    --call_depth_;
    if (!flow.ok()) return flow.status();
    return Value::String(std::move(text));
  };
}

absl::Status Interpreter::ExecSet(const Node& node, const FramePtr& frame) {
  ZF_ASSIGN_OR_RETURN(Value v, Eval(*node.expr, frame));
  if (!node.attr.empty()) {
    const Value* ns = frame->Find(node.targets[0]);
    if (ns == nullptr || !ns->is_namespace())
      return TypeError("cannot assign attribute on non-namespace object");
    Value shared = *ns;  // shares the namespace's entries
    shared.mutable_dict().Set(node.attr, std::move(v));
    return absl::OkStatus();
  }
  return BindTargets(node.targets, v, [&](const std::string& k, Value x) { frame->Set(k, std::move(x)); });
}

Value Interpreter::MakeMacro(const Node& node, const FramePtr& frame) {
  // The defining frame holds the macro, so the macro holds the frame weakly (no shared_ptr cycle). A macro
  // that outlives its scope (stored in a namespace, called after its loop) fails cleanly.
  std::weak_ptr<Frame> scope = frame;
  return Value::Function(node.name, [this, &node, scope](CallArgs& args) -> absl::StatusOr<Value> {
    FramePtr defined_in = scope.lock();
    if (!defined_in) return TypeError(absl::StrCat("macro '", node.name, "' is called outside its scope"));
    return CallMacro(node, defined_in, args);
  });
}

absl::StatusOr<Value> Interpreter::CallMacro(const Node& node, const FramePtr& defined_in, CallArgs& args) {
  if (call_depth_ >= limits_.max_call_depth) {
    return absl::ResourceExhaustedError(
        absl::StrCat("macro calls nest deeper than ", limits_.max_call_depth));
  }
  if (args.args.size() > node.params.size()) {
    return TypeError(
        absl::StrCat("macro '", node.name, "' takes not more than ", node.params.size(), " argument(s)"));
  }
  FramePtr frame = ChildScope(defined_in);
  for (size_t i = 0; i < node.params.size(); ++i) {
    if (i < args.args.size()) {
      frame->Set(node.params[i], args.args[i]);
    } else {
      frame->Set(node.params[i],
                 Value::Undefined(absl::StrCat("parameter '", node.params[i], "' was not provided")));
    }
  }
  for (auto& [k, v] : args.kwargs) {
    bool known = k == "caller" || std::find(node.params.begin(), node.params.end(), k) != node.params.end();
    if (!known) {
      return TypeError(absl::StrCat("macro '", core::Excerpt(node.name), "' takes no keyword argument '",
                                    core::Excerpt(k), "'"));
    }
    frame->Set(k, v);
  }
  for (size_t i = args.args.size(); i < node.params.size(); ++i) {
    bool given = false;
    for (auto& kv : args.kwargs) given = given || kv.first == node.params[i];
    if (given || !node.defaults[i]) continue;
    ZF_ASSIGN_OR_RETURN(Value dflt, Eval(*node.defaults[i], frame));
    frame->Set(node.params[i], dflt);
  }
  ++call_depth_;
  auto text = Capture(node.body, frame);
  --call_depth_;
  if (!text.ok()) return text.status();
  return Value::String(*std::move(text));
}

absl::Status Interpreter::ExecCallBlock(const Node& node, const FramePtr& frame, std::string* out) {
  std::weak_ptr<Frame> scope = frame;  // weak for the same reason as in MakeMacro
  Value caller = Value::Function("caller", [this, &node, scope](CallArgs&) -> absl::StatusOr<Value> {
    FramePtr call_site = scope.lock();
    if (!call_site) return TypeError("caller() is called outside its scope");
    // caller() is a macro: its sets stay inside.
    ZF_ASSIGN_OR_RETURN(std::string text, Capture(node.body, ChildScope(call_site)));
    return Value::String(std::move(text));
  });
  ZF_ASSIGN_OR_RETURN(Value v, EvalCall(*node.expr, frame, &caller));
  return Append(out, v.ToString());
}

}  // namespace zerofit::text
