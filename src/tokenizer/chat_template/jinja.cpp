#include "tokenizer/chat_template/jinja.h"

#include "tokenizer/chat_template/lexer.h"
#include "tokenizer/chat_template/parser.h"

namespace lathe::jinja {

Template::Template(const std::string& source, std::string origin) : origin_(std::move(origin)) {
  body_ = parse(tokenize(source, origin_), origin_);
}

std::string Template::render(const Value& context, const RenderOptions& options) const {
  Evaluator ev(origin_, options);
  return ev.render(body_, context);
}

}  // namespace lathe::jinja
