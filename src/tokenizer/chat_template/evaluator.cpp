#include "tokenizer/chat_template/evaluator.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "tokenizer/chat_template/filters.h"

namespace lathe::jinja {
namespace {

[[noreturn]] void undefined_error(const Value& v) {
  runtime_fail(v.s.empty() ? "value is undefined" : v.s);
}

[[noreturn]] void type_error(const char* op, const Value& a, const Value& b) {
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  runtime_fail(std::string("unsupported operand type(s) for ") + op + ": '" + type_name(a) +
               "' and '" + type_name(b) + "'");
}

// Python's floor division and modulo.
int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) runtime_fail("integer division or modulo by zero");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t floor_mod(int64_t a, int64_t b) {
  if (b == 0) runtime_fail("integer division or modulo by zero");
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

Value builtin_range(CallArgs& args, Evaluator& ev) {
  int64_t start = 0, stop = 0, step = 1;
  const auto& p = args.positional;
  for (const auto& v : p)
    if (!v.is_int_like())
      runtime_fail(std::string("range() expects integers, got ") + type_name(v));
  if (p.size() == 1)
    stop = p[0].as_int();
  else if (p.size() == 2 || p.size() == 3) {
    start = p[0].as_int();
    stop = p[1].as_int();
    if (p.size() == 3) step = p[2].as_int();
  } else {
    runtime_fail("range expected 1 to 3 arguments");
  }
  if (step == 0) runtime_fail("range() arg 3 must not be zero");
  List items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
    ev.count_iterations(1);
    items.push_back(Value::integer(i));
    if (__builtin_add_overflow(i, step, &i)) break;  // past INT64_MAX: beyond stop too
  }
  return Value::make_list(std::move(items));
}

Value builtin_dict(CallArgs& args, Evaluator&) {
  Value d = Value::make_dict();
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (src.is_dict()) {
      for (const auto& [k, v] : src.dict->items) d.dict->set(k, v);
    } else {
      for (const Value& pair : iterate(src)) {
        if (!pair.is_list() || pair.list->size() != 2)
          runtime_fail("dict() expects a mapping or pairs");
        d.dict->set((*pair.list)[0], (*pair.list)[1]);
      }
    }
  }
  for (const auto& [k, v] : args.keyword) d.dict->set(Value::string(k), v);
  d.finish_dict();
  return d;
}

Value builtin_namespace(CallArgs& args, Evaluator& ev) {
  Value ns = builtin_dict(args, ev);
  ns.is_namespace = true;
  for (const auto& [k, v] : ns.dict->items)
    if (k.is_string() && !k.s.empty() && k.s[0] == '_')
      runtime_fail(
          "Chat templates cannot store underscore-prefixed attributes on a namespace, "
          "but got '" +
          k.s + "'");
  return ns;
}

// What a value costs against Limits::max_steps beyond its one step: copying or scanning it.
int64_t step_weight(const Value& v) {
  switch (v.kind) {
    case Kind::String:
      return static_cast<int64_t>(v.s.size() / 64);
    case Kind::List:
      return v.list ? static_cast<int64_t>(v.list->size()) : 0;
    case Kind::Dict:
      return v.dict ? static_cast<int64_t>(v.dict->items.size()) : 0;
    case Kind::Undefined:
    case Kind::None:
    case Kind::Bool:
    case Kind::Int:
    case Kind::Float:
    case Kind::Callable:
      return 0;
  }
  return 0;
}

}  // namespace

const Value* Frame::lookup(const std::string& name) const {
  for (const Frame* f = this; f; f = f->parent.get()) {
    auto it = f->vars.find(name);
    if (it != f->vars.end()) return &it->second;
  }
  return nullptr;
}

Evaluator::Evaluator(std::string origin, RenderOptions options)
    : origin_(std::move(origin)), options_(options), globals_(std::make_shared<Frame>()) {
  auto& g = globals_->vars;
  g["range"] = Value::callable("range", builtin_range);
  g["dict"] = Value::callable("dict", builtin_dict);
  g["namespace"] = Value::callable("namespace", builtin_namespace);
  g["raise_exception"] =
      Value::callable("raise_exception", [](CallArgs& args, Evaluator&) -> Value {
        const Value* msg = args.get(0, "message");
        runtime_fail("raise_exception: " + (msg ? to_str(*msg) : std::string()));
      });
  g["strftime_now"] = Value::callable("strftime_now", [](CallArgs& args, Evaluator& ev) {
    const Value* fmt = args.get(0, "format");
    if (!fmt || !fmt->is_string()) runtime_fail("strftime_now() expects a format string");
    if (fmt->s.find('\0') != std::string::npos) runtime_fail("embedded null character");
    const std::time_t t = ev.options().now ? *ev.options().now : std::time(nullptr);
    std::tm tm{};
    localtime_r(&t, &tm);
    // std::strftime returns 0 both for an empty result and for one that does not fit; the
    // leading space makes the first impossible, so a 0 means "grow the buffer".
    const std::string format = " " + fmt->s;
    std::string buf(std::max<size_t>(256, 2 * format.size()), '\0');
    for (;;) {
      const size_t n = std::strftime(buf.data(), buf.size(), format.c_str(), &tm);
      if (n > 0) return Value::string(buf.substr(1, n - 1));
      ev.check_size(buf.size());
      buf.resize(2 * buf.size());
    }
  });
}

void Evaluator::count_iterations(int64_t n) {
  // Compared before adding: a count from the template (batch's fill) may be near INT64_MAX.
  if (n > options_.limits.max_loop_iterations - iterations_)
    runtime_fail("template exceeded " + std::to_string(options_.limits.max_loop_iterations) +
                 " loop iterations");
  iterations_ += n;
}

void Evaluator::count_steps(int64_t n) {
  if (n > options_.limits.max_steps - steps_)
    runtime_fail("template exceeded its work budget of " +
                 std::to_string(options_.limits.max_steps) +
                 " steps (statements, expressions and the sizes of their values)");
  steps_ += n;
}

void Evaluator::check_size(size_t bytes) const {
  if (bytes > options_.limits.max_output_bytes)
    runtime_fail("template output exceeded " + std::to_string(options_.limits.max_output_bytes) +
                 " bytes");
}

void Evaluator::append(std::string& out, const std::string& text) {
  emitted_ += text.size();
  check_size(emitted_);
  out += text;
}

void Evaluator::fail_at(Pos pos, const std::string& message) const {
  fail(origin_, ":", pos.line, ":", pos.col, ": ", message);
}

std::string Evaluator::render(const Body& body, const Value& context) {
  auto root = std::make_shared<Frame>();
  root->parent = globals_;
  if (context.is_dict())
    for (const auto& [k, v] : context.dict->items) root->vars[to_str(k)] = v;
  std::string out;
  exec_body(body, root, out);
  return out;
}

Value Evaluator::call(const Value& fn, CallArgs& args) {
  if (fn.kind != Kind::Callable) {
    if (fn.is_undefined()) undefined_error(fn);
    runtime_fail(std::string("'") + type_name(fn) + "' object is not callable");
  }
  return fn.fn->fn(args, *this);
}

Evaluator::Flow Evaluator::exec_body(const Body& body, const std::shared_ptr<Frame>& frame,
                                     std::string& out) {
  for (const auto& s : body) {
    Flow flow;
    try {
      flow = exec(*s, frame, out);
    } catch (const RuntimeError& e) {
      fail_at(s->pos, e.what());  // limits hit while appending text carry the statement's place
    }
    if (flow != Flow::Normal) return flow;
  }
  return Flow::Normal;
}

Evaluator::Flow Evaluator::exec(const Stmt& s, const std::shared_ptr<Frame>& frame,
                                std::string& out) {
  count_steps(1);
  switch (s.kind) {
    case StmtKind::Text:
      append(out, s.text);
      break;
    case StmtKind::Output: {
      const Value v = eval(*s.expr, frame);
      append(out, to_str(v));
      break;
    }
    case StmtKind::If:
      for (const auto& [cond, body] : s.branches)
        if (truthy(eval(*cond, frame))) return exec_body(body, frame, out);
      return exec_body(s.else_body, frame, out);
    case StmtKind::For:
      exec_for(s, frame, out);
      break;
    case StmtKind::Set:
      exec_set(s, frame);
      break;
    case StmtKind::SetBlock: {
      std::string captured;
      exec_body(s.body, frame, captured);
      Value v = Value::string(std::move(captured));
      if (s.expr) v = apply_filter_chain(*s.expr, frame, &v);
      frame->vars[s.targets[0]] = std::move(v);
      break;
    }
    case StmtKind::Macro:
      frame->vars[s.text] = make_macro(s, frame, s.body, s.params, s.text);
      break;
    case StmtKind::CallBlock: {
      const Expr& call = *s.expr;
      Value callee = eval(*call.args[0], frame);
      CallArgs args = eval_args(call, frame, 1);
      args.keyword.emplace_back("caller", make_macro(s, frame, s.body, s.params, "caller"));
      try {
        append(out, to_str(this->call(callee, args)));
      } catch (const RuntimeError& e) {
        fail_at(s.pos, e.what());
      }
      break;
    }
    case StmtKind::FilterBlock: {
      std::string captured;
      exec_body(s.body, frame, captured);
      const Value text = Value::string(std::move(captured));
      append(out, to_str(apply_filter_chain(*s.expr, frame, &text)));
      break;
    }
    case StmtKind::Break:
      return Flow::Break;
    case StmtKind::Continue:
      return Flow::Continue;
    case StmtKind::Scope: {
      auto child = std::make_shared<Frame>();
      child->parent = frame;
      exec_body(s.body, child, out);
      break;
    }
    case StmtKind::With: {
      auto child = std::make_shared<Frame>();
      child->parent = frame;
      for (const auto& p : s.params) child->vars[p.name] = eval(*p.default_value, frame);
      return exec_body(s.body, child, out);
    }
  }
  return Flow::Normal;
}

namespace {

bool contains_namespace(const Value& v) {
  if (v.is_namespace) return true;
  if (v.is_list())
    for (const Value& x : *v.list)
      if (x.depth > 0 && contains_namespace(x)) return true;
  if (v.is_dict())
    for (const auto& [k, x] : v.dict->items)
      if (x.depth > 0 && contains_namespace(x)) return true;
  return false;
}

void bind_targets(Frame& frame, const std::vector<std::string>& targets, const Value& v) {
  if (targets.size() == 1) {
    frame.vars[targets[0]] = v;
    return;
  }
  const List items = iterate(v);
  if (items.size() != targets.size())
    runtime_fail("cannot unpack " + std::to_string(items.size()) + " values into " +
                 std::to_string(targets.size()) + " names");
  for (size_t k = 0; k < targets.size(); ++k) frame.vars[targets[k]] = items[k];
}

}  // namespace

void Evaluator::exec_for(const Stmt& s, const std::shared_ptr<Frame>& frame, std::string& out) {
  const Value seq = eval(*s.expr, frame);
  if (s.recursive) fail_at(s.pos, "recursive for-loops are not supported");
  List items;
  try {
    if (seq.is_none() || seq.kind == Kind::Int || seq.kind == Kind::Float ||
        seq.kind == Kind::Bool || seq.kind == Kind::Callable)
      runtime_fail(std::string("'") + type_name(seq) + "' object is not iterable");
    items = iterate(seq);
    if (s.cond) {
      List kept;
      for (const Value& item : items) {
        count_iterations(1);
        auto probe = std::make_shared<Frame>();
        probe->parent = frame;
        bind_targets(*probe, s.targets, item);
        if (truthy(eval(*s.cond, probe))) kept.push_back(item);
      }
      items = std::move(kept);
    }
  } catch (const RuntimeError& e) {
    fail_at(s.pos, e.what());
  }
  if (items.empty()) {
    auto child = std::make_shared<Frame>();
    child->parent = frame;
    exec_body(s.else_body, child, out);
    return;
  }
  const int64_t n = static_cast<int64_t>(items.size());
  Value cycle_items;  // loop.cycle needs the index; built per iteration below
  for (int64_t k = 0; k < n; ++k) {
    try {
      count_iterations(1);
    } catch (const RuntimeError& e) {
      fail_at(s.pos, e.what());
    }
    auto child = std::make_shared<Frame>();
    child->parent = frame;
    try {
      bind_targets(*child, s.targets, items[k]);
    } catch (const RuntimeError& e) {
      fail_at(s.pos, e.what());
    }
    Value loop = Value::make_dict();
    auto& d = *loop.dict;
    auto put = [&](const char* key, Value v) {
      d.items.emplace_back(Value::string(key), std::move(v));
    };
    put("index", Value::integer(k + 1));
    put("index0", Value::integer(k));
    put("revindex", Value::integer(n - k));
    put("revindex0", Value::integer(n - k - 1));
    put("first", Value::boolean(k == 0));
    put("last", Value::boolean(k == n - 1));
    put("length", Value::integer(n));
    put("depth", Value::integer(1));
    put("depth0", Value::integer(0));
    put("previtem", k > 0 ? items[k - 1] : Value::undefined("there is no previous item"));
    put("nextitem", k + 1 < n ? items[k + 1] : Value::undefined("there is no next item"));
    put("cycle", Value::callable("cycle", [k](CallArgs& args, Evaluator&) {
          if (args.positional.empty()) runtime_fail("no items for cycling given");
          return args.positional[static_cast<size_t>(k) % args.positional.size()];
        }));
    loop.finish_dict();
    child->vars["loop"] = std::move(loop);
    const Flow flow = exec_body(s.body, child, out);
    if (flow == Flow::Break) break;
  }
}

void Evaluator::exec_set(const Stmt& s, const std::shared_ptr<Frame>& frame) {
  Value v = eval(*s.expr, frame);
  if (!s.text.empty()) {
    const Value* ns = frame->lookup(s.targets[0]);
    if (!ns || !ns->is_namespace)
      fail_at(s.pos, "cannot assign attribute on non-namespace object '" + s.targets[0] + "'");
    // Namespaces are the only mutable values; keeping them out of each other (and out of
    // what they hold) rules out reference cycles, which would print and free forever.
    if (contains_namespace(v)) fail_at(s.pos, "a namespace cannot be stored inside a namespace");
    if (s.text[0] == '_')
      fail_at(s.pos, "Chat templates cannot store underscore-prefixed attributes on a namespace");
    ns->dict->set(Value::string(s.text), std::move(v));
    return;
  }
  try {
    bind_targets(*frame, s.targets, v);
  } catch (const RuntimeError& e) {
    fail_at(s.pos, e.what());
  }
}

Value Evaluator::make_macro(const Stmt& s, const std::shared_ptr<Frame>& frame, const Body& body,
                            const std::vector<Param>& params, std::string name) {
  std::weak_ptr<Frame> weak = frame;
  const Body* body_ptr = &body;
  const std::vector<Param>* params_ptr = &params;
  const Pos pos = s.pos;
  return Value::callable(
      name, [this, weak, body_ptr, params_ptr, pos, name](CallArgs& args, Evaluator&) {
        auto parent = weak.lock();
        if (!parent) runtime_fail("macro '" + name + "' called after its scope ended");
        if (call_depth_ >= options_.limits.max_call_depth)
          runtime_fail("macro calls nested deeper than " +
                       std::to_string(options_.limits.max_call_depth) + " levels");
        auto f = std::make_shared<Frame>();
        f->parent = parent;
        const auto& ps = *params_ptr;
        List varargs;
        for (size_t k = 0; k < args.positional.size(); ++k) {
          if (k < ps.size())
            f->vars[ps[k].name] = args.positional[k];
          else
            varargs.push_back(args.positional[k]);
        }
        Value kwargs = Value::make_dict();
        for (const auto& [key, v] : args.keyword) {
          bool matched = false;
          for (const auto& p : ps) matched = matched || p.name == key;
          if (matched || key == "caller")
            f->vars[key] = v;
          else
            kwargs.dict->set(Value::string(key), v);
        }
        for (const auto& p : ps) {
          if (f->vars.count(p.name)) continue;
          f->vars[p.name] = p.default_value
                                ? eval(*p.default_value, f)
                                : Value::undefined("parameter '" + p.name + "' was not provided");
        }
        f->vars["varargs"] = Value::make_tuple(std::move(varargs));
        kwargs.finish_dict();
        f->vars["kwargs"] = std::move(kwargs);
        ++call_depth_;
        std::string out;
        try {
          exec_body(*body_ptr, f, out);
        } catch (...) {
          --call_depth_;
          throw;
        }
        --call_depth_;
        (void)pos;
        return Value::string(std::move(out));
      });
}

Value Evaluator::apply_filter_chain(const Expr& e, const std::shared_ptr<Frame>& frame,
                                    const Value* input) {
  // In `x | f | g` the innermost operand is an expression; in `{% filter f | g %}` and
  // `{% set x | f %}` it is null and the captured block text is `input`.
  Value in;
  if (!e.args[0])
    in = *input;
  else if (input && e.args[0]->kind == ExprKind::Filter)
    in = apply_filter_chain(*e.args[0], frame, input);
  else
    in = eval(*e.args[0], frame);
  if (!has_filter(e.name)) fail_at(e.pos, "no filter named '" + e.name + "'");
  CallArgs args = eval_args(e, frame, 1);
  try {
    return apply_filter(e.name, in, args, *this);
  } catch (const RuntimeError& err) {
    fail_at(e.pos, err.what());
  }
}

CallArgs Evaluator::eval_args(const Expr& e, const std::shared_ptr<Frame>& frame, size_t first) {
  CallArgs args;
  for (size_t k = first; k < e.args.size(); ++k) args.positional.push_back(eval(*e.args[k], frame));
  for (const auto& [key, expr] : e.kwargs) args.keyword.emplace_back(key, eval(*expr, frame));
  return args;
}

Value Evaluator::eval(const Expr& e, const std::shared_ptr<Frame>& frame) {
  try {
    Value v = eval_inner(e, frame);
    count_steps(1 + step_weight(v));
    return v;
  } catch (const RuntimeError& err) {
    fail_at(e.pos, err.what());
  }
}

Value Evaluator::eval_inner(const Expr& e, const std::shared_ptr<Frame>& frame) {
  switch (e.kind) {
    case ExprKind::Literal:
      return e.literal;
    case ExprKind::Name: {
      const Value* v = frame->lookup(e.name);
      return v ? *v : Value::undefined("'" + e.name + "' is undefined");
    }
    case ExprKind::List:
    case ExprKind::Tuple: {
      List items;
      for (const auto& a : e.args) items.push_back(eval(*a, frame));
      return e.kind == ExprKind::Tuple ? Value::make_tuple(std::move(items))
                                       : Value::make_list(std::move(items));
    }
    case ExprKind::Dict: {
      Value d = Value::make_dict();
      for (size_t k = 0; k + 1 < e.args.size(); k += 2)
        d.dict->set(eval(*e.args[k], frame), eval(*e.args[k + 1], frame));
      d.finish_dict();
      return d;
    }
    case ExprKind::Attr:
      return get_attribute(eval(*e.args[0], frame), e.name);
    case ExprKind::Index:
      return get_item(eval(*e.args[0], frame), eval(*e.args[1], frame));
    case ExprKind::Slice: {
      const Value obj = eval(*e.args[0], frame);
      std::optional<int64_t> parts[3];
      for (int k = 0; k < 3; ++k) {
        if (!e.args[k + 1]) continue;
        const Value v = eval(*e.args[k + 1], frame);
        if (v.is_none()) continue;
        if (!v.is_int_like()) runtime_fail("slice indices must be integers or None");
        parts[k] = v.as_int();
      }
      return slice_value(obj, parts[0], parts[1], parts[2]);
    }
    case ExprKind::Call: {
      const Value callee = eval(*e.args[0], frame);
      CallArgs args = eval_args(e, frame, 1);
      return call(callee, args);
    }
    case ExprKind::Filter:
      return apply_filter_chain(e, frame, nullptr);
    case ExprKind::Test: {
      if (!has_test(e.name)) runtime_fail("no test named '" + e.name + "'");
      const Value in = eval(*e.args[0], frame);
      CallArgs args = eval_args(e, frame, 1);
      return Value::boolean(apply_test(e.name, in, args, *this) != e.negated);
    }
    case ExprKind::Not:
      return Value::boolean(!truthy(eval(*e.args[0], frame)));
    case ExprKind::Neg:
    case ExprKind::Pos: {
      const Value v = eval(*e.args[0], frame);
      if (v.is_undefined()) undefined_error(v);
      if (!v.is_numeric())
        runtime_fail(std::string("bad operand type for unary ") +
                     (e.kind == ExprKind::Neg ? "-" : "+") + ": '" + type_name(v) + "'");
      if (e.kind == ExprKind::Pos) return v.kind == Kind::Bool ? Value::integer(v.as_int()) : v;
      if (v.kind == Kind::Float) return Value::number(-v.f);
      if (v.as_int() == std::numeric_limits<int64_t>::min()) runtime_fail("integer overflow");
      return Value::integer(-v.as_int());
    }
    case ExprKind::Binary:
      return eval_binary(e, eval(*e.args[0], frame), eval(*e.args[1], frame));
    case ExprKind::Compare: {
      Value left = eval(*e.args[0], frame);
      for (size_t k = 0; k < e.ops.size(); ++k) {
        Value right = eval(*e.args[k + 1], frame);
        if (!eval_compare(e.ops[k], left, right)) return Value::boolean(false);
        left = std::move(right);
      }
      return Value::boolean(true);
    }
    case ExprKind::And: {
      Value a = eval(*e.args[0], frame);
      return truthy(a) ? eval(*e.args[1], frame) : a;
    }
    case ExprKind::Or: {
      Value a = eval(*e.args[0], frame);
      return truthy(a) ? a : eval(*e.args[1], frame);
    }
    case ExprKind::Cond:
      if (truthy(eval(*e.args[1], frame))) return eval(*e.args[0], frame);
      return e.args[2] ? eval(*e.args[2], frame)
                       : Value::undefined("conditional expression had no else");
  }
  return Value();
}

bool Evaluator::eval_compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return equals(a, b);
  if (op == "!=") return !equals(a, b);
  if (op == "in" || op == "not in") {
    bool found = false;
    if (b.is_string()) {
      if (!a.is_string())
        runtime_fail(std::string("'in <string>' requires string as left operand, not ") +
                     type_name(a));
      found = b.s.find(a.s) != std::string::npos;
    } else if (b.is_dict()) {
      found = b.dict->find(a) != nullptr;
    } else if (b.is_list()) {
      for (const Value& x : *b.list) found = found || equals(x, a);
    } else if (!b.is_undefined()) {
      runtime_fail(std::string("argument of type '") + type_name(b) + "' is not iterable");
    }
    return op == "in" ? found : !found;
  }
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  const int c = compare(a, b);
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  return c >= 0;
}

Value Evaluator::eval_binary(const Expr& e, const Value& a, const Value& b) {
  const std::string& op = e.name;
  if (op == "~") {
    std::string s = to_str(a) + to_str(b);
    check_size(s.size());
    return Value::string(std::move(s));
  }
  const bool both_int = a.is_int_like() && b.is_int_like();
  const bool both_num = a.is_numeric() && b.is_numeric();
  if (op == "+") {
    if (both_int) {
      int64_t r = 0;
      if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) runtime_fail("integer overflow");
      return Value::integer(r);
    }
    if (both_num) return Value::number(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) {
      check_size(a.s.size() + b.s.size());
      return Value::string(a.s + b.s);
    }
    if (a.is_list() && b.is_list()) {
      List items = *a.list;
      items.insert(items.end(), b.list->begin(), b.list->end());
      return Value::make_list(std::move(items));
    }
    if (a.is_string() && !b.is_undefined())
      runtime_fail(std::string("can only concatenate str (not \"") + type_name(b) + "\") to str");
    type_error("+", a, b);
  }
  if (op == "-") {
    if (both_int) {
      int64_t r = 0;
      if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) runtime_fail("integer overflow");
      return Value::integer(r);
    }
    if (both_num) return Value::number(a.as_double() - b.as_double());
    type_error("-", a, b);
  }
  if (op == "*") {
    if (both_int) {
      int64_t r = 0;
      if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) runtime_fail("integer overflow");
      return Value::integer(r);
    }
    if (both_num) return Value::number(a.as_double() * b.as_double());
    const Value* seq = a.is_int_like() ? &b : &a;
    const Value* count = a.is_int_like() ? &a : &b;
    if (count->is_int_like() && (seq->is_string() || seq->is_list())) {
      const int64_t n = std::max<int64_t>(0, count->as_int());
      if (seq->is_string()) {
        if (seq->s.empty()) return Value::string("");  // '' * 10**18 would loop for ever
        check_size(seq->s.size() * static_cast<size_t>(std::min<int64_t>(n, 1 << 30)));
        std::string out;
        for (int64_t k = 0; k < n; ++k) out += seq->s;
        return Value::string(std::move(out));
      }
      if (seq->list->empty()) return Value::make_list();
      // Strings are copied into each repeat: [s] * n holds n copies of s.
      size_t bytes = 0, total = 0;
      for (const Value& x : *seq->list)
        if (x.is_string()) bytes += x.s.size();
      if (__builtin_mul_overflow(bytes, static_cast<size_t>(n), &total))
        total = std::numeric_limits<size_t>::max();
      check_size(total);
      // Counted by the elements made, not the repeats: a long list repeated is as much work.
      int64_t elements = 0;
      if (__builtin_mul_overflow(n, static_cast<int64_t>(seq->list->size()), &elements))
        elements = std::numeric_limits<int64_t>::max();
      count_iterations(elements);
      List items;
      for (int64_t k = 0; k < n; ++k)
        items.insert(items.end(), seq->list->begin(), seq->list->end());
      return Value::make_list(std::move(items));
    }
    type_error("*", a, b);
  }
  if (op == "/") {
    if (!both_num) type_error("/", a, b);
    if (b.as_double() == 0) runtime_fail("division by zero");
    return Value::number(a.as_double() / b.as_double());
  }
  if (op == "//") {
    if (both_int) return Value::integer(floor_div(a.as_int(), b.as_int()));
    if (!both_num) type_error("//", a, b);
    if (b.as_double() == 0) runtime_fail("float floor division by zero");
    return Value::number(std::floor(a.as_double() / b.as_double()));
  }
  if (op == "%") {
    if (both_int) return Value::integer(floor_mod(a.as_int(), b.as_int()));
    if (both_num) {
      const double y = b.as_double();
      if (y == 0) runtime_fail("float modulo");
      double r = std::fmod(a.as_double(), y);
      if (r != 0 && ((r < 0) != (y < 0))) r += y;
      return Value::number(r);
    }
    if (a.is_string()) {
      CallArgs args;
      if (b.is_list() && b.is_tuple)
        args.positional = *b.list;
      else
        args.positional.push_back(b);
      return apply_filter("format", a, args, *this);
    }
    type_error("%", a, b);
  }
  if (op == "**") {
    if (both_int && b.as_int() >= 0) {
      int64_t base = a.as_int(), exp = b.as_int(), r = 1;
      while (exp > 0) {
        if ((exp & 1) && __builtin_mul_overflow(r, base, &r)) runtime_fail("integer overflow");
        exp >>= 1;
        if (exp > 0 && __builtin_mul_overflow(base, base, &base)) runtime_fail("integer overflow");
      }
      return Value::integer(r);
    }
    if (!both_num) type_error("** or pow()", a, b);
    return Value::number(std::pow(a.as_double(), b.as_double()));
  }
  runtime_fail("unknown operator " + op);
}

}  // namespace lathe::jinja
