// Renders a parsed template: scopes, loops, macros, and the limits that bound hostile templates.
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "tokenizer/chat_template/ast.h"
#include "tokenizer/chat_template/value.h"

namespace lathe::jinja {

struct Limits {
  size_t max_output_bytes = 16u << 20;    // all text produced, captured blocks included
  int64_t max_loop_iterations = 1000000;  // summed over every loop and range()
  int max_call_depth = 256;               // nested macro / caller() calls
  // Total work, summed over the render: one step per statement run and per expression
  // evaluated, plus the size of each expression's value (elements of a list or dict, 64-byte
  // units of a string), so that copying and scanning big values is paid for too. Bounds what
  // the other limits do not: exponential macro recursion, and loops over big values.
  int64_t max_steps = 20000000;
};

struct RenderOptions {
  Limits limits;
  // Time seen by strftime_now(); unset: the current local time, as transformers uses.
  std::optional<std::time_t> now;
};

// One variable scope. jinja2 gives each for-loop iteration and each macro call its own.
struct Frame {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Frame> parent;
  const Value* lookup(const std::string& name) const;
};

class Evaluator {
 public:
  Evaluator(std::string origin, RenderOptions options);

  // Renders `body` with `context` (a dict of variables) over the built-in globals.
  std::string render(const Body& body, const Value& context);

  // Calls a callable value (macro, builtin, bound method); used by filters too.
  Value call(const Value& fn, CallArgs& args);

  // Counts work against the limits; throw RuntimeError when one is exceeded.
  void count_iterations(int64_t n);
  void count_steps(int64_t n);
  void check_size(size_t bytes) const;

  const RenderOptions& options() const { return options_; }

 private:
  enum class Flow { Normal, Break, Continue };

  Flow exec_body(const Body& body, const std::shared_ptr<Frame>& frame, std::string& out);
  Flow exec(const Stmt& s, const std::shared_ptr<Frame>& frame, std::string& out);
  void exec_for(const Stmt& s, const std::shared_ptr<Frame>& frame, std::string& out);
  void exec_set(const Stmt& s, const std::shared_ptr<Frame>& frame);
  Value make_macro(const Stmt& s, const std::shared_ptr<Frame>& frame, const Body& body,
                   const std::vector<Param>& params, std::string name);
  Value eval(const Expr& e, const std::shared_ptr<Frame>& frame);
  Value eval_inner(const Expr& e, const std::shared_ptr<Frame>& frame);
  Value eval_binary(const Expr& e, const Value& a, const Value& b);
  bool eval_compare(const std::string& op, const Value& a, const Value& b);
  CallArgs eval_args(const Expr& e, const std::shared_ptr<Frame>& frame, size_t first);
  Value apply_filter_chain(const Expr& e, const std::shared_ptr<Frame>& frame, const Value* input);
  void append(std::string& out, const std::string& text);
  [[noreturn]] void fail_at(Pos pos, const std::string& message) const;

  std::string origin_;
  RenderOptions options_;
  std::shared_ptr<Frame> globals_;
  size_t emitted_ = 0;
  int64_t iterations_ = 0;
  int64_t steps_ = 0;
  int call_depth_ = 0;
};

}  // namespace lathe::jinja
