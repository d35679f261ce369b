#include "tokenizer/chat_template/parser.h"

#include <cstdlib>
#include <initializer_list>

#include "core/error.h"

namespace lathe::jinja {
namespace {

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, const std::string& origin)
      : toks_(tokens), origin_(origin) {}

  Body parse_template() {
    std::string end;
    Body body = parse_body({}, end);
    return body;
  }

 private:
  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxParseDepth)
        p.error(p.cur(),
                "template nested deeper than " + std::to_string(kMaxParseDepth) + " levels");
    }
    ~DepthGuard() { --p.depth_; }
  };

  const Token& cur() const { return toks_[i_]; }
  const Token& peek(size_t n = 1) const { return toks_[std::min(i_ + n, toks_.size() - 1)]; }
  const Token& next() {
    const Token& t = toks_[i_];
    if (i_ + 1 < toks_.size()) ++i_;
    return t;
  }

  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TokKind::End:
        return "end of template";
      case TokKind::Text:
        return "template text";
      case TokKind::VarBegin:
        return "'{{'";
      case TokKind::VarEnd:
        return "'}}'";
      case TokKind::BlockBegin:
        return "'{%'";
      case TokKind::BlockEnd:
        return "'%}'";
      case TokKind::String:
        return "string literal";
      case TokKind::Int:
      case TokKind::Float:
        return "number " + t.text;
      case TokKind::Name:
      case TokKind::Op:
        return "'" + t.text + "'";
    }
    return "token";
  }

  [[noreturn]] void error(const Token& t, const std::string& message) const {
    fail(origin_, ":", t.pos.line, ":", t.pos.col, ": syntax error: ", message);
  }

  bool is_op(const char* op) const { return cur().kind == TokKind::Op && cur().text == op; }
  bool is_name(const char* name) const { return cur().kind == TokKind::Name && cur().text == name; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) error(cur(), std::string("expected '") + op + "', got " + describe(cur()));
  }
  std::string expect_name() {
    if (cur().kind != TokKind::Name) error(cur(), "expected a name, got " + describe(cur()));
    return next().text;
  }
  void expect_block_end() {
    if (cur().kind != TokKind::BlockEnd) error(cur(), "expected '%}', got " + describe(cur()));
    next();
  }

  static ExprPtr make(ExprKind kind, Pos pos) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    return e;
  }

  // ---- statements ----

  // Parses until a block tag whose keyword is in `ends`; leaves the position after that
  // keyword and stores it in `end`. With no `ends`, parses to the end of the template.
  Body parse_body(std::initializer_list<const char*> ends, std::string& end) {
    DepthGuard guard(*this);
    Body body;
    const Token& opener = cur();
    while (true) {
      const Token& t = cur();
      if (t.kind == TokKind::End) {
        if (ends.size() == 0) return body;
        std::string names;
        for (const char* e : ends)
          names += std::string(names.empty() ? "" : " or ") + "'" + e + "'";
        error(t, "unexpected end of template, expected " + names + " (block opened at line " +
                     std::to_string(opener.pos.line) + ")");
      }
      if (t.kind == TokKind::Text) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Text;
        s->pos = t.pos;
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.kind == TokKind::VarBegin) {
        next();
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Output;
        s->pos = t.pos;
        s->expr = parse_tuple(true);
        if (cur().kind != TokKind::VarEnd) error(cur(), "expected '}}', got " + describe(cur()));
        next();
        body.push_back(std::move(s));
      } else if (t.kind == TokKind::BlockBegin) {
        next();
        if (cur().kind != TokKind::Name)
          error(cur(), "expected a statement name, got " + describe(cur()));
        for (const char* e : ends) {
          if (cur().text == e) {
            end = e;
            next();
            return body;
          }
        }
        body.push_back(parse_statement(t.pos));
      } else {
        error(t, "unexpected " + describe(t));
      }
    }
  }

  StmtPtr parse_statement(Pos pos) {
    const Token& kw = cur();
    const std::string name = kw.text;
    auto s = std::make_unique<Stmt>();
    s->pos = pos;
    next();
    std::string end;
    if (name == "if") {
      s->kind = StmtKind::If;
      ExprPtr cond = parse_tuple(true);
      expect_block_end();
      while (true) {
        Body body = parse_body({"elif", "else", "endif"}, end);
        s->branches.emplace_back(std::move(cond), std::move(body));
        if (end == "elif") {
          cond = parse_tuple(true);
          expect_block_end();
          continue;
        }
        if (end == "else") {
          expect_block_end();
          s->else_body = parse_body({"endif"}, end);
        }
        break;
      }
      expect_block_end();
    } else if (name == "for") {
      s->kind = StmtKind::For;
      s->targets = parse_targets();
      if (!skip_name("in")) error(cur(), "expected 'in', got " + describe(cur()));
      s->expr = parse_tuple(false);
      if (skip_name("if")) s->cond = parse_tuple(true);
      if (skip_name("recursive")) s->recursive = true;
      expect_block_end();
      ++loop_depth_;
      s->body = parse_body({"else", "endfor"}, end);
      --loop_depth_;
      if (end == "else") {
        expect_block_end();
        s->else_body = parse_body({"endfor"}, end);
      }
      expect_block_end();
    } else if (name == "set") {
      if (cur().kind == TokKind::Name && peek().kind == TokKind::Op && peek().text == "." &&
          peek(2).kind == TokKind::Name) {
        s->kind = StmtKind::Set;
        s->targets = {next().text};
        next();
        s->text = next().text;
        expect_op("=");
        s->expr = parse_tuple(true);
        expect_block_end();
      } else {
        s->targets = parse_targets();
        if (skip_op("=")) {
          s->kind = StmtKind::Set;
          s->expr = parse_tuple(true);
          expect_block_end();
        } else {
          s->kind = StmtKind::SetBlock;
          if (s->targets.size() != 1) error(cur(), "block set takes one name");
          if (is_op("|")) s->expr = parse_filter_chain();
          expect_block_end();
          s->body = parse_body({"endset"}, end);
          expect_block_end();
        }
      }
    } else if (name == "macro") {
      s->kind = StmtKind::Macro;
      s->text = expect_name();
      s->params = parse_params();
      expect_block_end();
      s->body = parse_body({"endmacro"}, end);
      expect_block_end();
    } else if (name == "call") {
      s->kind = StmtKind::CallBlock;
      if (is_op("(")) s->params = parse_params();
      s->expr = parse_expression(true);
      if (s->expr->kind != ExprKind::Call) error(kw, "expected a call after 'call'");
      expect_block_end();
      s->body = parse_body({"endcall"}, end);
      expect_block_end();
    } else if (name == "filter") {
      s->kind = StmtKind::FilterBlock;
      s->expr = parse_filter_chain();
      expect_block_end();
      s->body = parse_body({"endfilter"}, end);
      expect_block_end();
    } else if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) error(kw, "'" + name + "' outside of a loop");
      s->kind = name == "break" ? StmtKind::Break : StmtKind::Continue;
      expect_block_end();
    } else if (name == "generation" || name == "block") {
      // transformers' AssistantTracker: {% generation %} only marks text; render the body.
      s->kind = StmtKind::Scope;
      if (name == "block") {
        expect_name();
        skip_name("scoped");
        skip_name("required");
      }
      expect_block_end();
      s->body = parse_body({name == "block" ? "endblock" : "endgeneration"}, end);
      if (name == "block" && cur().kind == TokKind::Name) next();
      expect_block_end();
    } else if (name == "with") {
      s->kind = StmtKind::With;
      while (cur().kind != TokKind::BlockEnd) {
        if (!s->params.empty()) expect_op(",");
        Param p;
        p.name = expect_name();
        expect_op("=");
        p.default_value = parse_expression(true);
        s->params.push_back(std::move(p));
      }
      expect_block_end();
      s->body = parse_body({"endwith"}, end);
      expect_block_end();
    } else if (name == "include" || name == "import" || name == "from" || name == "extends") {
      error(kw, "'" + name + "' is not supported: chat templates have no file access");
    } else {
      error(kw, "unknown statement '" + name + "'");
    }
    return s;
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    const bool paren = skip_op("(");
    do {
      names.push_back(expect_name());
    } while (skip_op(","));
    if (paren) expect_op(")");
    return names;
  }

  std::vector<Param> parse_params() {
    std::vector<Param> params;
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      if (is_op(")")) break;
      Param p;
      p.name = expect_name();
      if (skip_op("=")) p.default_value = parse_expression(true);
      params.push_back(std::move(p));
    }
    expect_op(")");
    return params;
  }

  // `| f(args) | g` with a null input (the captured block text is filled in at runtime).
  ExprPtr parse_filter_chain() {
    ExprPtr node;
    skip_op("|");
    do {
      auto f = make(ExprKind::Filter, cur().pos);
      f->name = expect_name();
      while (skip_op(".")) f->name += "." + expect_name();
      f->args.push_back(std::move(node));
      if (is_op("(")) parse_call_args(*f);
      node = std::move(f);
    } while (skip_op("|"));
    return node;
  }

  // ---- expressions ----

  ExprPtr parse_tuple(bool with_condexpr) {
    const Pos pos = cur().pos;
    ExprPtr first = parse_expression(with_condexpr);
    if (!is_op(",")) return first;
    auto t = make(ExprKind::Tuple, pos);
    t->args.push_back(std::move(first));
    while (skip_op(",")) {
      if (cur().kind == TokKind::BlockEnd || cur().kind == TokKind::VarEnd || is_op(")")) break;
      if (is_name("if")) break;
      t->args.push_back(parse_expression(with_condexpr));
    }
    return t;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard guard(*this);
    ExprPtr e = parse_or();
    if (!with_condexpr) return e;
    while (is_name("if")) {
      const Pos pos = next().pos;
      auto c = make(ExprKind::Cond, pos);
      ExprPtr cond = parse_or();
      ExprPtr other = skip_name("else") ? parse_expression(true) : nullptr;
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(cond));
      c->args.push_back(std::move(other));
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(ExprKind kind, Pos pos, ExprPtr a, ExprPtr b, std::string op = {}) {
    auto e = make(kind, pos);
    e->name = std::move(op);
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (is_name("or")) {
      const Pos pos = next().pos;
      e = binary(ExprKind::Or, pos, std::move(e), parse_and());
    }
    return e;
  }

  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (is_name("and")) {
      const Pos pos = next().pos;
      e = binary(ExprKind::And, pos, std::move(e), parse_not());
    }
    return e;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      auto e = make(ExprKind::Not, next().pos);
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const Pos pos = cur().pos;
    ExprPtr first = parse_math1();
    std::unique_ptr<Expr> cmp;
    while (true) {
      std::string op;
      if (cur().kind == TokKind::Op &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
           cur().text == ">" || cur().text == ">=")) {
        op = next().text;
      } else if (is_name("in")) {
        next();
        op = "in";
      } else if (is_name("not") && peek().kind == TokKind::Name && peek().text == "in") {
        next();
        next();
        op = "not in";
      } else {
        break;
      }
      if (!cmp) {
        cmp = make(ExprKind::Compare, pos);
        cmp->args.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& t = next();
      e = binary(ExprKind::Binary, t.pos, std::move(e), parse_concat(), t.text);
    }
    return e;
  }

  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (is_op("~")) {
      const Token& t = next();
      e = binary(ExprKind::Binary, t.pos, std::move(e), parse_math2(), "~");
    }
    return e;
  }

  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& t = next();
      e = binary(ExprKind::Binary, t.pos, std::move(e), parse_pow(), t.text);
    }
    return e;
  }

  ExprPtr parse_pow() {
    ExprPtr e = parse_unary(true);
    while (is_op("**")) {
      const Token& t = next();
      e = binary(ExprKind::Binary, t.pos, std::move(e), parse_unary(true), "**");
    }
    return e;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const Token& t = next();
      e = make(t.text == "-" ? ExprKind::Neg : ExprKind::Pos, t.pos);
      e->args.push_back(parse_unary(false));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    switch (t.kind) {
      case TokKind::Name: {
        next();
        auto e = make(ExprKind::Literal, t.pos);
        if (t.text == "true" || t.text == "True")
          e->literal = Value::boolean(true);
        else if (t.text == "false" || t.text == "False")
          e->literal = Value::boolean(false);
        else if (t.text == "none" || t.text == "None")
          e->literal = Value::none();
        else {
          e->kind = ExprKind::Name;
          e->name = t.text;
        }
        return e;
      }
      case TokKind::String: {
        std::string s;
        while (cur().kind == TokKind::String) s += next().text;  // adjacent literals join
        auto e = make(ExprKind::Literal, t.pos);
        e->literal = Value::string(std::move(s));
        return e;
      }
      case TokKind::Int: {
        next();
        auto e = make(ExprKind::Literal, t.pos);
        try {
          e->literal = Value::integer(std::stoll(t.text));
        } catch (const std::exception&) {
          error(t, "integer literal out of range: " + t.text);
        }
        return e;
      }
      case TokKind::Float: {
        next();
        auto e = make(ExprKind::Literal, t.pos);
        // strtod, not stod: Python's float() makes 1e999 inf, where stod throws out_of_range.
        e->literal = Value::number(std::strtod(t.text.c_str(), nullptr));
        return e;
      }
      case TokKind::Op:
        if (t.text == "(") {
          next();
          if (skip_op(")")) return make(ExprKind::Tuple, t.pos);
          ExprPtr e = parse_tuple(true);
          if (e->kind == ExprKind::Tuple) e->pos = t.pos;
          expect_op(")");
          return e;
        }
        if (t.text == "[") {
          next();
          auto e = make(ExprKind::List, t.pos);
          while (!is_op("]")) {
            if (!e->args.empty()) expect_op(",");
            if (is_op("]")) break;
            e->args.push_back(parse_expression(true));
          }
          expect_op("]");
          return e;
        }
        if (t.text == "{") {
          next();
          auto e = make(ExprKind::Dict, t.pos);
          while (!is_op("}")) {
            if (!e->args.empty()) expect_op(",");
            if (is_op("}")) break;
            e->args.push_back(parse_expression(true));
            expect_op(":");
            e->args.push_back(parse_expression(true));
          }
          expect_op("}");
          return e;
        }
        break;
      default:
        break;
    }
    error(t, "unexpected " + describe(t));
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      if (is_op(".")) {
        const Pos pos = next().pos;
        if (cur().kind == TokKind::Int) {
          auto idx = make(ExprKind::Literal, cur().pos);
          const Token& t = next();
          try {
            idx->literal = Value::integer(std::stoll(t.text));
          } catch (const std::exception&) {
            error(t, "integer literal out of range: " + t.text);
          }
          e = binary(ExprKind::Index, pos, std::move(e), std::move(idx));
        } else {
          auto a = make(ExprKind::Attr, pos);
          a->name = expect_name();
          a->args.push_back(std::move(e));
          e = std::move(a);
        }
      } else if (is_op("[")) {
        e = parse_subscript(std::move(e));
      } else if (is_op("(")) {
        auto c = make(ExprKind::Call, cur().pos);
        c->args.push_back(std::move(e));
        parse_call_args(*c);
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr e) {
    const Pos pos = next().pos;  // '['
    ExprPtr start, stop, step;
    if (!is_op(":")) start = parse_expression(true);
    if (!is_op(":")) {
      expect_op("]");
      return binary(ExprKind::Index, pos, std::move(e), std::move(start));
    }
    next();
    if (!is_op("]") && !is_op(":")) stop = parse_expression(true);
    if (skip_op(":") && !is_op("]")) step = parse_expression(true);
    expect_op("]");
    auto s = make(ExprKind::Slice, pos);
    s->args.push_back(std::move(e));
    s->args.push_back(std::move(start));
    s->args.push_back(std::move(stop));
    s->args.push_back(std::move(step));
    return s;
  }

  void parse_call_args(Expr& call) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (cur().kind == TokKind::Name && peek().kind == TokKind::Op && peek().text == "=") {
        std::string key = next().text;
        next();
        call.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!call.kwargs.empty()) error(cur(), "positional argument follows keyword argument");
        call.args.push_back(parse_expression(true));
      }
    }
    expect_op(")");
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      if (is_op("|")) {
        next();
        auto f = make(ExprKind::Filter, cur().pos);
        f->name = expect_name();
        while (skip_op(".")) f->name += "." + expect_name();
        f->args.push_back(std::move(e));
        if (is_op("(")) parse_call_args(*f);
        e = std::move(f);
      } else if (is_name("is")) {
        next();
        auto t = make(ExprKind::Test, cur().pos);
        t->negated = skip_name("not");
        t->name = expect_name();
        while (skip_op(".")) t->name += "." + expect_name();
        t->args.push_back(std::move(e));
        if (is_op("(")) {
          parse_call_args(*t);
        } else if ((cur().kind == TokKind::Name && !is_name("else") && !is_name("or") &&
                    !is_name("and")) ||
                   cur().kind == TokKind::String || cur().kind == TokKind::Int ||
                   cur().kind == TokKind::Float || is_op("[") || is_op("{")) {
          // `x is divisibleby 3`: one argument without parentheses.
          t->args.push_back(parse_postfix(parse_primary()));
        }
        e = std::move(t);
      } else if (is_op("(")) {
        auto c = make(ExprKind::Call, cur().pos);
        c->args.push_back(std::move(e));
        parse_call_args(*c);
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  const std::vector<Token>& toks_;
  const std::string& origin_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Body parse(const std::vector<Token>& tokens, const std::string& origin) {
  return Parser(tokens, origin).parse_template();
}

}  // namespace lathe::jinja
