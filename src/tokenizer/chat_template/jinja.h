// A Jinja2 template engine for chat templates: parse once, render many times. Semantics follow
// jinja2 3.1 as transformers configures it (ImmutableSandboxedEnvironment, trim_blocks,
// lstrip_blocks, loopcontrols, tojson override, raise_exception and strftime_now globals).
#pragma once

#include <string>

#include "tokenizer/chat_template/ast.h"
#include "tokenizer/chat_template/evaluator.h"
#include "tokenizer/chat_template/value.h"

namespace lathe::jinja {

class Template {
 public:
  // Parses `source`; `origin` (a file name) prefixes every error message. Throws lathe::Error.
  Template(const std::string& source, std::string origin);

  // Renders with `context` (a dict of variables). Throws lathe::Error naming origin:line:col.
  std::string render(const Value& context, const RenderOptions& options = {}) const;

  const std::string& origin() const { return origin_; }

 private:
  std::string origin_;
  Body body_;
};

}  // namespace lathe::jinja
