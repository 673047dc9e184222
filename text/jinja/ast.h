// Syntax tree of a parsed Jinja template. Nodes own their children; positions are 1-based template
// line:column for error messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/value.h"

namespace zerofit::text {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,  // literal
    kName,     // name
    kList,     // children
    kTuple,    // children
    kDict,     // children: key0, value0, key1, value1, ...
    kGetAttr,  // children[0].name
    kGetItem,  // children[0][children[1]]
    kSlice,    // children[0][children[1]:children[2]:children[3]], absent parts null
    kCall,     // children[0](children[1..], kwargs)
    kFilter,   // children[0] | name(children[1..], kwargs); children[0] null in a filter block
    kTest,     // children[0] is [not] name(children[1..])
    kUnary,    // name ("not", "-", "+") children[0]
    kBinary,   // children[0] name children[1]; name: + - * / // % ** ~ and or
    kCompare,  // children[0] ops[0] children[1] ops[1] children[2] ... (chained like Python)
    kCond,     // children[0] if children[1] else children[2] (children[2] null: undefined)
  };
  Kind kind;
  int line = 0;
  int column = 0;
  std::string name;
  Value literal;
  bool negated = false;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
};

struct Node;
using NodeList = std::vector<std::unique_ptr<Node>>;

struct Node {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // branches (else: a null condition)
    kFor,          // for targets in expr [if cond] [recursive] body [else else_body]
    kSet,          // set targets = expr, or set targets[0].attr = expr
    kSetBlock,     // set targets[0] %}body{% endset
    kMacro,        // macro name(params=defaults) body
    kCallBlock,    // call expr %}body{% endcall: body is the macro's caller()
    kFilterBlock,  // filter expr (a filter chain over a null input) body
    kGeneration,   // transformers' generation %}body{% endgeneration: body in its own scope
    kWith,         // with params[i] = defaults[i], ... %}body{% endwith: body in its own scope
    kBreak,
    kContinue,
  };
  Kind kind;
  int line = 0;
  int column = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr cond;
  std::vector<std::pair<ExprPtr, NodeList>> branches;
  NodeList body;
  NodeList else_body;
  std::vector<std::string> targets;
  std::string attr;
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // one per param; null where none (with: the values)
  bool recursive = false;         // kFor: `recursive`, loop(items) renders the loop again one level down
};

}  // namespace zerofit::text
