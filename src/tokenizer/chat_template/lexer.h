// Splits a Jinja template into tokens, applying whitespace control as transformers configures
// jinja2: trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False.
#pragma once

#include <string>
#include <vector>

#include "tokenizer/chat_template/ast.h"

namespace lathe::jinja {

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

// Throws lathe::Error "origin:line:col: message" on malformed input.
std::vector<Token> tokenize(const std::string& source, const std::string& origin,
                            const LexOptions& options = {});

}  // namespace lathe::jinja
