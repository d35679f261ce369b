// Tokens and syntax tree of the Jinja engine.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/chat_template/value.h"

namespace lathe::jinja {

struct Pos {
  int line = 1;
  int col = 1;
};

enum class TokKind {
  Text,        // literal template text (whitespace control already applied)
  VarBegin,    // {{
  VarEnd,      // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,
  String,
  Int,
  Float,
  Op,  // operator or punctuation, text holds it
  End,
};

struct Token {
  TokKind kind = TokKind::End;
  std::string text;
  Pos pos;
};

enum class ExprKind {
  Literal,  // literal
  Name,     // name
  List,     // args
  Tuple,    // args
  Dict,     // args: key, value, key, value...
  Attr,     // args[0].name
  Index,    // args[0][args[1]]
  Slice,    // args[0][args[1]:args[2]:args[3]] (null parts allowed)
  Call,     // args[0](args[1..], kwargs)
  Filter,   // args[0] | name(args[1..], kwargs)
  Test,     // args[0] is [not] name(args[1..], kwargs)
  Not,      // not args[0]
  Neg,      // -args[0]
  Pos,      // +args[0]
  Binary,   // args[0] name args[1] for + - * / // % ** ~
  Compare,  // args[0] ops[0] args[1] ops[1] args[2] ...
  And,      // args[0] and args[1]
  Or,       // args[0] or args[1]
  Cond,     // args[0] if args[1] else args[2] (args[2] may be null)
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind = ExprKind::Literal;
  Pos pos;
  std::string name;
  Value literal;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  bool negated = false;
};

enum class StmtKind {
  Text,         // text
  Output,       // {{ expr }}
  If,           // branches; else_body
  For,          // targets in expr [if cond]; body; else_body
  Set,          // targets = expr, or ns.attr = expr (attr non-empty)
  SetBlock,     // {% set x %}body{% endset %}, filters applied to the captured text
  Macro,        // name(params) body
  CallBlock,    // {% call(params) expr %}body{% endcall %}
  FilterBlock,  // {% filter f %}body{% endfilter %}
  Break,
  Continue,
  Scope,  // body only: {% generation %}, {% with %} without targets
  With,   // {% with a = x %}body
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Param {
  std::string name;
  ExprPtr default_value;  // null: required
};

struct Stmt {
  StmtKind kind = StmtKind::Text;
  Pos pos;
  std::string text;  // Text; Macro name; Set attribute for ns.attr
  ExprPtr expr;      // Output, For iterable, Set value, CallBlock call, FilterBlock filter chain
  ExprPtr cond;      // For filter
  std::vector<std::string> targets;
  std::vector<std::pair<ExprPtr, Body>> branches;  // If
  Body body;
  Body else_body;
  std::vector<Param> params;  // Macro, CallBlock; With assignments (name, value)
  bool recursive = false;
};

}  // namespace lathe::jinja
