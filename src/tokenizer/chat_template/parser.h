// Builds the syntax tree from tokens (grammar and precedence of jinja2's parser.py).
#pragma once

#include <string>
#include <vector>

#include "tokenizer/chat_template/ast.h"

namespace lathe::jinja {

// Nesting deeper than this (brackets, blocks) is rejected, so hostile templates cannot
// exhaust the stack while parsing.
inline constexpr int kMaxParseDepth = 200;

// Throws lathe::Error "origin:line:col: syntax error: ..." on malformed templates.
Body parse(const std::vector<Token>& tokens, const std::string& origin);

}  // namespace lathe::jinja
