// Tree-walking evaluator of a parsed Jinja template with jinja2's semantics (default Undefined, scoping
// of for loops and macros, loop controls).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "text/jinja/ast.h"
#include "text/jinja/value.h"

namespace zerofit::text {

struct RenderLimits {
  size_t max_output_bytes = 16 << 20;  // output (and every captured block) larger than this is an error
  int max_call_depth = 64;             // macro recursion
  size_t max_range = 1 << 16;          // elements one range() or list repetition may produce
  // Statements executed plus loop iterations: bounds the work of nested loops, whose output may be empty.
  int64_t max_steps = 1 << 22;
};

// Renders `nodes` with `globals` as the outermost scope (after the built-ins range, namespace, dict).
// Not thread-safe per instance; cheap to construct, one per render. Errors name the template position:
// InvalidArgument "chat_template:LINE:COL: message"; raise_exception's message is kept verbatim.
class Interpreter {
 public:
  explicit Interpreter(const RenderLimits& limits) : limits_(limits) {}

  absl::StatusOr<std::string> Render(const NodeList& nodes,
                                     std::vector<std::pair<std::string, Value>> globals);

 private:
  // One scope: the globals, a for-loop iteration, a macro call. `set` writes the innermost frame; lookups
  // walk outwards (jinja2: an if block is no scope, a loop body is one per iteration).
  struct Frame {
    std::vector<std::pair<std::string, Value>> vars;
    std::shared_ptr<Frame> parent;

    const Value* Find(const std::string& name) const;
    void Set(const std::string& name, Value value);
  };
  using FramePtr = std::shared_ptr<Frame>;
  static FramePtr ChildScope(const FramePtr& parent);
  enum class Flow { kNormal, kBreak, kContinue };

  // Statements append to *out; break/continue travel up as Flow to the enclosing loop.
  absl::StatusOr<Flow> Exec(const NodeList& nodes, const FramePtr& frame, std::string* out);
  absl::StatusOr<Flow> ExecNode(const Node& node, const FramePtr& frame, std::string* out);
  absl::StatusOr<Flow> ExecIf(const Node& node, const FramePtr& frame, std::string* out);
  absl::StatusOr<Flow> ExecFor(const Node& node, const FramePtr& frame, std::string* out);
  // One level of a for loop over `iterable`; depth0 > 0 inside loop(...) of a recursive loop.
  absl::StatusOr<Flow> ExecLoop(const Node& node, const FramePtr& frame, const Value& iterable,
                                int64_t depth0, std::string* out);
  // What calling the loop object does: the next level of a recursive loop, else jinja2's TypeError.
  NativeFunction RecursiveLoopCall(const Node& node, const FramePtr& frame, int64_t depth0);
  absl::Status ExecSet(const Node& node, const FramePtr& frame);
  absl::Status ExecCallBlock(const Node& node, const FramePtr& frame, std::string* out);
  Value MakeMacro(const Node& node, const FramePtr& frame);
  absl::StatusOr<Value> CallMacro(const Node& node, const FramePtr& defined_in, CallArgs& args);
  absl::StatusOr<std::string> Capture(const NodeList& body, const FramePtr& frame);
  absl::Status Append(std::string* out, std::string_view text) const;

  absl::StatusOr<Value> Eval(const Expr& e, const FramePtr& frame);
  absl::StatusOr<Value> EvalBinary(const Expr& e, const FramePtr& frame);
  absl::StatusOr<Value> EvalCompare(const Expr& e, const FramePtr& frame);
  absl::StatusOr<Value> EvalGetItem(const Expr& e, const FramePtr& frame);
  absl::StatusOr<Value> EvalSlice(const Expr& e, const FramePtr& frame);
  absl::StatusOr<Value> EvalCall(const Expr& e, const FramePtr& frame, const Value* caller);
  // A filter chain; a null innermost input (a filter block) reads `block_input`.
  absl::StatusOr<Value> EvalFilter(const Expr& e, const FramePtr& frame, const Value* block_input);
  absl::StatusOr<Value> EvalTest(const Expr& e, const FramePtr& frame);
  // A filter's or call's string result must fit limits_.max_output_bytes (it can only grow from there).
  absl::Status CheckResultSize(const Expr& e, const Value& v) const;
  absl::StatusOr<CallArgs> EvalArgs(const Expr& e, size_t first_child, const FramePtr& frame);
  absl::StatusOr<Value> Arithmetic(const std::string& op, const Value& a, const Value& b) const;

  std::vector<std::pair<std::string, Value>> Builtins() const;

  // Counts one unit of work against limits_.max_steps.
  absl::Status Step();

  RenderLimits limits_;
  int call_depth_ = 0;
  int64_t steps_ = 0;
};

}  // namespace zerofit::text
