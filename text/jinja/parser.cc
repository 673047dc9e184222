#include "text/jinja/parser.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "core/excerpt.h"
#include "core/status_macros.h"
#include "text/jinja/builtins.h"
#include "text/jinja/lexer.h"

namespace zerofit::text {
namespace {

using Tags = std::set<std::string>;

class Parser {
 public:
  Parser(std::vector<Token> tokens, int max_depth) : tokens_(std::move(tokens)), max_depth_(max_depth) {}

  absl::StatusOr<NodeList> Run() {
    std::string end;
    return ParseBody({}, &end);
  }

 private:
  // RAII nesting counter: every recursive production takes one.
  class DepthGuard {
   public:
    explicit DepthGuard(Parser* p) : p_(p) { ++p_->depth_; }
    ~DepthGuard() { --p_->depth_; }

   private:
    Parser* p_;
  };

  const Token& Peek(size_t ahead = 0) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  const Token& Next() { return tokens_[pos_ < tokens_.size() - 1 ? pos_++ : pos_]; }
  bool IsOp(const char* op, size_t ahead = 0) const {
    return Peek(ahead).kind == TokenKind::kOp && Peek(ahead).text == op;
  }
  bool IsName(const char* name, size_t ahead = 0) const {
    return Peek(ahead).kind == TokenKind::kName && Peek(ahead).text == name;
  }

  template <typename At>  // a Token or a syntax tree node
  absl::Status ErrorAt(const At& t, absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat("chat_template:", t.line, ":", t.column, ": ", message));
  }
  absl::Status CheckDepth() const {
    if (depth_ > max_depth_) return ErrorAt(Peek(), absl::StrCat("nesting deeper than ", max_depth_));
    return absl::OkStatus();
  }
  static std::string Describe(const Token& t) {
    switch (t.kind) {
      case TokenKind::kEof:
        return "end of template";
      case TokenKind::kBlockEnd:
        return "end of statement block";
      case TokenKind::kVarEnd:
        return "end of print statement";
      default:
        return absl::StrCat("'", core::Excerpt(t.text), "'");
    }
  }
  absl::Status ExpectOp(const char* op) {
    if (!IsOp(op)) return ErrorAt(Peek(), absl::StrCat("expected '", op, "', got ", Describe(Peek())));
    Next();
    return absl::OkStatus();
  }
  absl::Status Expect(TokenKind kind, const char* what) {
    if (Peek().kind != kind)
      return ErrorAt(Peek(), absl::StrCat("expected ", what, ", got ", Describe(Peek())));
    Next();
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> ExpectName() {
    if (Peek().kind != TokenKind::kName)
      return ErrorAt(Peek(), absl::StrCat("expected a name, got ", Describe(Peek())));
    return Next().text;
  }

  template <typename T>
  static std::unique_ptr<T> Make(typename T::Kind kind, const Token& at) {
    auto n = std::make_unique<T>();
    n->kind = kind;
    n->line = at.line;
    n->column = at.column;
    return n;
  }

  // Parses nodes until a block tag named in `ends` (consumed up to and including its name, which goes to
  // *end) or the end of the template (only allowed when `ends` is empty).
  absl::StatusOr<NodeList> ParseBody(const Tags& ends, std::string* end) {
    DepthGuard guard(this);
    ZF_RETURN_IF_ERROR(CheckDepth());
    NodeList nodes;
    while (true) {
      const Token& t = Peek();
      if (t.kind == TokenKind::kEof) {
        if (ends.empty()) return nodes;
        return ErrorAt(t, absl::StrCat("unexpected end of template, expected '", *ends.rbegin(), "'"));
      }
      if (t.kind == TokenKind::kText) {
        auto n = Make<Node>(Node::Kind::kText, t);
        n->text = Next().text;
        nodes.push_back(std::move(n));
        continue;
      }
      if (t.kind == TokenKind::kVarBegin) {
        auto n = Make<Node>(Node::Kind::kOutput, Next());
        ZF_ASSIGN_OR_RETURN(n->expr, ParseExpression());
        ZF_RETURN_IF_ERROR(Expect(TokenKind::kVarEnd, "'}}'"));
        nodes.push_back(std::move(n));
        continue;
      }
      if (t.kind != TokenKind::kBlockBegin) return ErrorAt(t, absl::StrCat("unexpected ", Describe(t)));
      const Token& name = Peek(1);
      if (name.kind == TokenKind::kName && ends.count(name.text)) {
        Next();
        *end = Next().text;
        return nodes;
      }
      Next();
      ZF_ASSIGN_OR_RETURN(auto node, ParseStatement());
      nodes.push_back(std::move(node));
    }
  }

  absl::StatusOr<std::unique_ptr<Node>> ParseStatement() {
    const Token& t = Peek();
    if (t.kind != TokenKind::kName) return ErrorAt(t, "expected a tag name");
    const std::string tag = t.text;
    if (tag == "if") return ParseIf();
    if (tag == "for") return ParseFor();
    if (tag == "set") return ParseSet();
    if (tag == "macro") return ParseMacro();
    if (tag == "call") return ParseCallBlock();
    if (tag == "filter") return ParseFilterBlock();
    if (tag == "generation") return ParseGeneration();
    if (tag == "with") return ParseWith();
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) return ErrorAt(t, absl::StrCat("'", core::Excerpt(tag), "' outside loop"));
      auto n = Make<Node>(tag == "break" ? Node::Kind::kBreak : Node::Kind::kContinue, Next());
      ZF_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd, "'%}'"));
      return n;
    }
    static const Tags kKnownEnds = {"elif",   "else",     "endif",   "endfor",
                                    "endset", "endmacro", "endcall", "endfilter"};
    if (kKnownEnds.count(tag)) return ErrorAt(t, absl::StrCat("unexpected tag '", core::Excerpt(tag), "'"));
    return ErrorAt(t, absl::StrCat("unsupported tag '", core::Excerpt(tag), "'"));
  }

  absl::StatusOr<std::unique_ptr<Node>> ParseIf() {
    auto n = Make<Node>(Node::Kind::kIf, Next());
    std::string end = "elif";
    while (end == "elif") {
      ZF_ASSIGN_OR_RETURN(ExprPtr cond, ParseExpression());
      ZF_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd, "'%}'"));
      ZF_ASSIGN_OR_RETURN(NodeList body, ParseBody({"elif", "else", "endif"}, &end));
      n->branches.emplace_back(std::move(cond), std::move(body));
    }
    if (end == "else") {
      ZF_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd, "'%}'"));
      ZF_ASSIGN_OR_RETURN(NodeList body, ParseBody({"endif"}, &end));
      n->branches.emplace_back(nullptr, std::move(body));
    }
    ZF_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd, "'%}'"));
    return n;
  }

  // Names separated by commas, optionally in parentheses: `x`, `k, v`, `(k, v)`.
  absl::StatusOr<std::vector<std::string>> ParseTargets() {
    bool paren = IsOp("(");
    if (paren) Next();
    std::vector<std::string> names;
    do {
      ZF_ASSIGN_OR_RETURN(std::string name, ExpectName());
      names.push_back(name);
    } while (IsOp(",") && (Next(), Peek().kind == TokenKind::kName));
    if (paren) ZF_RETURN_IF_ERROR(ExpectOp(")"));
    return names;
  }

  absl::StatusOr<std::unique_ptr<Node>> ParseFor() {
    auto n = Make<Node>(Node::Kind::kFor, Next());
    ZF_ASSIGN_OR_RETURN(n->targets, ParseTargets());
    if (!IsName("in")) return ErrorAt(Peek(), absl::StrCat("expected 'in', got ", Describe(Peek())));
    Next();
    ZF_ASSIGN_OR_RETURN(n->expr, ParseTuple(/*with_condexpr=*/false));
    if (IsName("if")) {
      Next();
      ZF_ASSIGN_OR_RETURN(n->cond, ParseExpression());
    }
    if (IsName("recursive")) {
      Next();
      n->recursive = true;
    }
    ZF_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd, "'%}'"));
    std::string end;
    ++loop_depth_;
    auto body = ParseBody({"else", "endfor"}, &end);
    --loop_depth_;
    if (!body.ok()) return body.status();
    n->body = *std::move(body);
    if (end == "else") {
      ZF_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd, "'%}'"));
      ZF_ASSIGN_OR_RETURN(n->else_body, ParseBody({"endfor"}, &end));
    }
    ZF_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd, "'%}'"));
    return n;
  }

  absl::StatusOr<std::unique_ptr<Node>> ParseSet() {
    auto n = Make<Node>(Node::Kind::kSet, Next());
    if (Peek().kind == TokenKind::kName && IsOp(".", 1)) {
      n->targets.push_back(Next().text);
      Next();
      ZF_ASSIGN_OR_RETURN(n->attr, ExpectName());
    } else {
      ZF_ASSIGN_OR_RETURN(n->targets, ParseTargets());
    }
    if (Peek().kind == TokenKind::kBlockEnd && n->attr.empty() && n->targets.size() == 1) {
      Next();
      n->kind = Node::Kind::kSetBlock;
      std::string end;
      ZF_ASSIGN_OR_RETURN(n->body, ParseBody({"endset"}, &end));
      ZF_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd, "'%}'"));
      return n;
    }
    ZF_RETURN_IF_ERROR(ExpectOp("="));
    ZF_ASSIGN_OR_RETURN(n->expr, ParseTuple(/*with_condexpr=*/true));
    ZF_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd, "'%}'"));
    return n;
  }

  absl::StatusOr<std::unique_ptr<Node>> ParseMacro() {
    auto n = Make<Node>(Node::Kind::kMacro, Next());
    ZF_ASSIGN_OR_RETURN(n->name, ExpectName());
    ZF_RETURN_IF_ERROR(ExpectOp("("));
    while (!IsOp(")")) {
      if (!n->params.empty()) ZF_RETURN_IF_ERROR(ExpectOp(","));
      ZF_ASSIGN_OR_RETURN(std::string param, ExpectName());
      n->params.push_back(param);
      ExprPtr dflt;
      if (IsOp("=")) {
        Next();
        ZF_ASSIGN_OR_RETURN(dflt, ParseExpression());
      }
      n->defaults.push_back(std::move(dflt));
    }
    Next();
    ZF_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd, "'%}'"));
    std::string end;
    int outer_loops = loop_depth_;
    loop_depth_ = 0;  // a macro body is no loop body even when defined inside one
    auto body = ParseBody({"endmacro"}, &end);
    loop_depth_ = outer_loops;
    if (!body.ok()) return body.status();
    n->body = *std::move(body);
    if (Peek().kind == TokenKind::kName) Next();  // {% endmacro name %}
    ZF_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd, "'%}'"));
    return n;
  }

  absl::StatusOr<std::unique_ptr<Node>> ParseCallBlock() {
    auto n = Make<Node>(Node::Kind::kCallBlock, Next());
    if (IsOp("(")) return ErrorAt(Peek(), "unsupported: call blocks with caller arguments");
    ZF_ASSIGN_OR_RETURN(n->expr, ParseExpression());
    if (n->expr->kind != Expr::Kind::kCall) return ErrorAt(Peek(), "expected a macro call after 'call'");
    ZF_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd, "'%}'"));
    std::string end;
    ZF_ASSIGN_OR_RETURN(n->body, ParseBody({"endcall"}, &end));
    ZF_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd, "'%}'"));
    return n;
  }

  absl::StatusOr<std::unique_ptr<Node>> ParseFilterBlock() {
    auto n = Make<Node>(Node::Kind::kFilterBlock, Next());
    ExprPtr chain;
    do {
      if (chain) Next();  // '|'
      ZF_ASSIGN_OR_RETURN(chain, ParseFilter(std::move(chain)));
    } while (IsOp("|"));
    n->expr = std::move(chain);
    ZF_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd, "'%}'"));
    std::string end;
    ZF_ASSIGN_OR_RETURN(n->body, ParseBody({"endfilter"}, &end));
    ZF_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd, "'%}'"));
    return n;
  }

  absl::StatusOr<std::unique_ptr<Node>> ParseWith() {
    auto n = Make<Node>(Node::Kind::kWith, Next());
    while (Peek().kind != TokenKind::kBlockEnd) {
      if (!n->params.empty()) ZF_RETURN_IF_ERROR(ExpectOp(","));
      ZF_ASSIGN_OR_RETURN(std::string name, ExpectName());
      ZF_RETURN_IF_ERROR(ExpectOp("="));
      ZF_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
      n->params.push_back(name);
      n->defaults.push_back(std::move(value));
    }
    Next();
    std::string end;
    ZF_ASSIGN_OR_RETURN(n->body, ParseBody({"endwith"}, &end));
    ZF_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd, "'%}'"));
    return n;
  }

  // transformers' AssistantTracker tag; it only marks assistant text for token masks, so it renders its body.
  absl::StatusOr<std::unique_ptr<Node>> ParseGeneration() {
    auto n = Make<Node>(Node::Kind::kGeneration, Next());
    ZF_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd, "'%}'"));
    std::string end;
    ZF_ASSIGN_OR_RETURN(n->body, ParseBody({"endgeneration"}, &end));
    ZF_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd, "'%}'"));
    return n;
  }

  // ---- expressions (jinja2 precedence: condexpr < or < and < not < compare < +- < ~ < */ //% < ** < unary)

  absl::StatusOr<ExprPtr> ParseExpression(bool with_condexpr = true) {
    DepthGuard guard(this);
    ZF_RETURN_IF_ERROR(CheckDepth());
    ZF_ASSIGN_OR_RETURN(ExprPtr expr, ParseOr());
    while (with_condexpr && IsName("if")) {
      auto cond = Make<Expr>(Expr::Kind::kCond, Next());
      ZF_ASSIGN_OR_RETURN(ExprPtr test, ParseOr());
      ExprPtr otherwise;
      if (IsName("else")) {
        Next();
        ZF_ASSIGN_OR_RETURN(otherwise, ParseExpression());
      }
      cond->children.push_back(std::move(expr));
      cond->children.push_back(std::move(test));
      cond->children.push_back(std::move(otherwise));
      expr = std::move(cond);
    }
    return expr;
  }

  // An expression, or a tuple when commas follow (`set a, b = 1, 2`, `for x in a, b`).
  absl::StatusOr<ExprPtr> ParseTuple(bool with_condexpr) {
    const Token& start = Peek();
    ZF_ASSIGN_OR_RETURN(ExprPtr first, ParseExpression(with_condexpr));
    if (!IsOp(",")) return first;
    auto tuple = Make<Expr>(Expr::Kind::kTuple, start);
    tuple->children.push_back(std::move(first));
    while (IsOp(",")) {
      Next();
      if (Peek().kind == TokenKind::kBlockEnd) break;
      ZF_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(with_condexpr));
      tuple->children.push_back(std::move(item));
    }
    return tuple;
  }

  ExprPtr Binary(const Token& at, const std::string& op, ExprPtr l, ExprPtr r) {
    auto e = Make<Expr>(Expr::Kind::kBinary, at);
    e->name = op;
    e->children.push_back(std::move(l));
    e->children.push_back(std::move(r));
    return e;
  }

  absl::StatusOr<ExprPtr> ParseOr() {
    ZF_ASSIGN_OR_RETURN(ExprPtr l, ParseAnd());
    while (IsName("or")) {
      const Token& at = Next();
      ZF_ASSIGN_OR_RETURN(ExprPtr r, ParseAnd());
      l = Binary(at, "or", std::move(l), std::move(r));
    }
    return l;
  }

  absl::StatusOr<ExprPtr> ParseAnd() {
    ZF_ASSIGN_OR_RETURN(ExprPtr l, ParseNot());
    while (IsName("and")) {
      const Token& at = Next();
      ZF_ASSIGN_OR_RETURN(ExprPtr r, ParseNot());
      l = Binary(at, "and", std::move(l), std::move(r));
    }
    return l;
  }

  absl::StatusOr<ExprPtr> ParseNot() {
    if (!IsName("not")) return ParseCompare();
    DepthGuard guard(this);
    ZF_RETURN_IF_ERROR(CheckDepth());
    auto e = Make<Expr>(Expr::Kind::kUnary, Next());
    e->name = "not";
    ZF_ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
    e->children.push_back(std::move(operand));
    return e;
  }

  absl::StatusOr<ExprPtr> ParseCompare() {
    const Token& start = Peek();
    ZF_ASSIGN_OR_RETURN(ExprPtr first, ParseMath1());
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (Peek().kind == TokenKind::kOp &&
          (IsOp("==") || IsOp("!=") || IsOp("<") || IsOp("<=") || IsOp(">") || IsOp(">="))) {
        op = Next().text;
      } else if (IsName("in")) {
        Next();
        op = "in";
      } else if (IsName("not") && IsName("in", 1)) {
        Next();
        Next();
        op = "not in";
      } else {
        break;
      }
      if (!cmp) {
        cmp = Make<Expr>(Expr::Kind::kCompare, start);
        cmp->children.push_back(std::move(first));
      }
      ZF_ASSIGN_OR_RETURN(ExprPtr r, ParseMath1());
      cmp->ops.push_back(op);
      cmp->children.push_back(std::move(r));
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  absl::StatusOr<ExprPtr> ParseMath1() {
    ZF_ASSIGN_OR_RETURN(ExprPtr l, ParseConcat());
    while (IsOp("+") || IsOp("-")) {
      const Token& at = Next();
      ZF_ASSIGN_OR_RETURN(ExprPtr r, ParseConcat());
      l = Binary(at, at.text, std::move(l), std::move(r));
    }
    return l;
  }

  absl::StatusOr<ExprPtr> ParseConcat() {
    ZF_ASSIGN_OR_RETURN(ExprPtr l, ParseMath2());
    while (IsOp("~")) {
      const Token& at = Next();
      ZF_ASSIGN_OR_RETURN(ExprPtr r, ParseMath2());
      l = Binary(at, "~", std::move(l), std::move(r));
    }
    return l;
  }

  absl::StatusOr<ExprPtr> ParseMath2() {
    ZF_ASSIGN_OR_RETURN(ExprPtr l, ParsePow());
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const Token& at = Next();
      ZF_ASSIGN_OR_RETURN(ExprPtr r, ParsePow());
      l = Binary(at, at.text, std::move(l), std::move(r));
    }
    return l;
  }

  absl::StatusOr<ExprPtr> ParsePow() {
    ZF_ASSIGN_OR_RETURN(ExprPtr l, ParseUnary(true));
    while (IsOp("**")) {
      const Token& at = Next();
      ZF_ASSIGN_OR_RETURN(ExprPtr r, ParseUnary(true));
      l = Binary(at, "**", std::move(l), std::move(r));
    }
    return l;
  }

  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter) {
    DepthGuard guard(this);
    ZF_RETURN_IF_ERROR(CheckDepth());
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      node = Make<Expr>(Expr::Kind::kUnary, Peek());
      node->name = Next().text;
      ZF_ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary(false));
      node->children.push_back(std::move(operand));
    } else {
      ZF_ASSIGN_OR_RETURN(node, ParsePrimary());
    }
    ZF_ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
    if (!with_filter) return node;
    return ParseFilterExpr(std::move(node));
  }

  absl::StatusOr<ExprPtr> ParsePrimary() {
    const Token& t = Peek();
    if (t.kind == TokenKind::kName) {
      Next();
      auto e = Make<Expr>(Expr::Kind::kLiteral, t);
      if (t.text == "true" || t.text == "True") {
        e->literal = Value::Bool(true);
      } else if (t.text == "false" || t.text == "False") {
        e->literal = Value::Bool(false);
      } else if (t.text == "none" || t.text == "None") {
        e->literal = Value::None();
      } else {
        e->kind = Expr::Kind::kName;
        e->name = t.text;
      }
      return e;
    }
    if (t.kind == TokenKind::kString) {
      auto e = Make<Expr>(Expr::Kind::kLiteral, t);
      std::string s;
      while (Peek().kind == TokenKind::kString) s += Next().text;  // adjacent literals concatenate
      e->literal = Value::String(std::move(s));
      return e;
    }
    if (t.kind == TokenKind::kInt || t.kind == TokenKind::kFloat) {
      auto e = Make<Expr>(Expr::Kind::kLiteral, Next());
      e->literal = t.kind == TokenKind::kInt ? Value::Int(t.int_value) : Value::Float(t.float_value);
      return e;
    }
    if (IsOp("(")) return ParseParen();
    if (IsOp("[")) return ParseSequence(Expr::Kind::kList, "]");
    if (IsOp("{")) return ParseDictLiteral();
    return ErrorAt(t, absl::StrCat("unexpected ", Describe(t)));
  }

  absl::StatusOr<ExprPtr> ParseParen() {
    const Token& open = Next();
    if (IsOp(")")) {
      Next();
      return Make<Expr>(Expr::Kind::kTuple, open);
    }
    ZF_ASSIGN_OR_RETURN(ExprPtr first, ParseExpression());
    if (IsOp(")")) {
      Next();
      return first;
    }
    auto tuple = Make<Expr>(Expr::Kind::kTuple, open);
    tuple->children.push_back(std::move(first));
    while (IsOp(",")) {
      Next();
      if (IsOp(")")) break;
      ZF_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression());
      tuple->children.push_back(std::move(item));
    }
    ZF_RETURN_IF_ERROR(ExpectOp(")"));
    return tuple;
  }

  absl::StatusOr<ExprPtr> ParseSequence(Expr::Kind kind, const char* close) {
    auto e = Make<Expr>(kind, Next());
    while (!IsOp(close)) {
      if (!e->children.empty()) ZF_RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp(close)) break;
      ZF_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression());
      e->children.push_back(std::move(item));
    }
    Next();
    return e;
  }

  absl::StatusOr<ExprPtr> ParseDictLiteral() {
    auto e = Make<Expr>(Expr::Kind::kDict, Next());
    while (!IsOp("}")) {
      if (!e->children.empty()) ZF_RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp("}")) break;
      ZF_ASSIGN_OR_RETURN(ExprPtr key, ParseExpression());
      ZF_RETURN_IF_ERROR(ExpectOp(":"));
      ZF_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
      e->children.push_back(std::move(key));
      e->children.push_back(std::move(value));
    }
    Next();
    return e;
  }

  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr node) {
    while (true) {
      if (IsOp(".")) {
        const Token& at = Next();
        auto e = Make<Expr>(Expr::Kind::kGetAttr, at);
        if (Peek().kind == TokenKind::kInt) {  // foo.0 is foo[0]
          e->kind = Expr::Kind::kGetItem;
          auto idx = Make<Expr>(Expr::Kind::kLiteral, Peek());
          idx->literal = Value::Int(Next().int_value);
          e->children.push_back(std::move(node));
          e->children.push_back(std::move(idx));
        } else {
          ZF_ASSIGN_OR_RETURN(e->name, ExpectName());
          e->children.push_back(std::move(node));
        }
        node = std::move(e);
      } else if (IsOp("[")) {
        ZF_ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
      } else if (IsOp("(")) {
        ZF_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
      } else {
        return node;
      }
    }
  }

  absl::StatusOr<ExprPtr> ParseSubscript(ExprPtr obj) {
    const Token& at = Next();
    ExprPtr parts[3];
    int colons = 0;
    while (!IsOp("]")) {
      if (IsOp(":")) {
        Next();
        if (++colons > 2) return ErrorAt(Peek(), "too many ':' in subscript");
        continue;
      }
      if (parts[colons]) return ErrorAt(Peek(), absl::StrCat("expected ']', got ", Describe(Peek())));
      ZF_ASSIGN_OR_RETURN(parts[colons], ParseExpression());
    }
    Next();
    auto e = Make<Expr>(colons ? Expr::Kind::kSlice : Expr::Kind::kGetItem, at);
    e->children.push_back(std::move(obj));
    if (!colons && !parts[0]) return ErrorAt(at, "empty subscript");
    e->children.push_back(std::move(parts[0]));
    if (colons) {
      e->children.push_back(std::move(parts[1]));
      e->children.push_back(std::move(parts[2]));
    }
    return e;
  }

  // Appends `(args, kw=args)` to `e`'s children and kwargs.
  absl::Status ParseArgs(Expr* e) {
    ZF_RETURN_IF_ERROR(ExpectOp("("));
    bool first = true;
    while (!IsOp(")")) {
      if (!first) ZF_RETURN_IF_ERROR(ExpectOp(","));
      first = false;
      if (IsOp(")")) break;
      if (Peek().kind == TokenKind::kName && IsOp("=", 1)) {
        std::string key = Next().text;
        Next();
        ZF_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
        e->kwargs.emplace_back(key, std::move(value));
        continue;
      }
      if (!e->kwargs.empty()) return ErrorAt(Peek(), "positional argument after keyword argument");
      ZF_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
      e->children.push_back(std::move(value));
    }
    Next();
    return absl::OkStatus();
  }

  absl::StatusOr<ExprPtr> ParseCall(ExprPtr callee) {
    auto e = Make<Expr>(Expr::Kind::kCall, Peek());
    e->line = callee->line;  // errors of a call point at the callee, not at '('
    e->column = callee->column;
    e->children.push_back(std::move(callee));
    ZF_RETURN_IF_ERROR(ParseArgs(e.get()));
    return e;
  }

  absl::StatusOr<ExprPtr> ParseFilter(ExprPtr input) {
    auto e = Make<Expr>(Expr::Kind::kFilter, Peek());
    ZF_ASSIGN_OR_RETURN(e->name, ExpectName());
    if (!IsKnownFilter(e->name)) return ErrorAt(*e, absl::StrCat("No filter named '", e->name, "'."));
    e->children.push_back(std::move(input));
    if (IsOp("(")) ZF_RETURN_IF_ERROR(ParseArgs(e.get()));
    return e;
  }

  absl::StatusOr<ExprPtr> ParseFilterExpr(ExprPtr node) {
    while (true) {
      if (IsOp("|")) {
        Next();
        ZF_ASSIGN_OR_RETURN(node, ParseFilter(std::move(node)));
      } else if (IsName("is")) {
        ZF_ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
      } else if (IsOp("(")) {
        ZF_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
      } else {
        return node;
      }
    }
  }

  absl::StatusOr<ExprPtr> ParseTest(ExprPtr input) {
    auto e = Make<Expr>(Expr::Kind::kTest, Next());
    if (IsName("not")) {
      Next();
      e->negated = true;
    }
    const Token& name = Peek();
    ZF_ASSIGN_OR_RETURN(e->name, ExpectName());
    if (!IsKnownTest(e->name)) return ErrorAt(name, absl::StrCat("No test named '", e->name, "'."));
    e->children.push_back(std::move(input));
    if (IsOp("(")) {
      ZF_RETURN_IF_ERROR(ParseArgs(e.get()));
      return e;
    }
    const Token& t = Peek();
    bool arg_follows = t.kind == TokenKind::kString || t.kind == TokenKind::kInt ||
                       t.kind == TokenKind::kFloat || IsOp("[") || IsOp("{") ||
                       (t.kind == TokenKind::kName && t.text != "else" && t.text != "or" && t.text != "and" &&
                        t.text != "if" && t.text != "is" && t.text != "in" && t.text != "not");
    if (arg_follows) {
      ZF_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
      ZF_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
      e->children.push_back(std::move(arg));
    }
    return e;
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;  // for bodies around the current position (break/continue need one)
  const int max_depth_;
};

}  // namespace

absl::StatusOr<NodeList> ParseTemplate(std::string_view source, int max_depth) {
  ZF_ASSIGN_OR_RETURN(std::vector<Token> tokens, LexTemplate(source));
  return Parser(std::move(tokens), max_depth).Run();
}

}  // namespace zerofit::text
