#include "tokenizer/chat_template/lexer.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace lathe::jinja {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

class Lexer {
 public:
  Lexer(std::string src, const std::string& origin, const LexOptions& options)
      : src_(std::move(src)), origin_(origin), opt_(options) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    size_t pos = 0;
    bool strip_next = false;  // a '-' closed the previous tag
    while (true) {
      if (strip_next) {
        while (pos < src_.size() && is_space(src_[pos])) ++pos;
        strip_next = false;
      }
      const size_t start = find_tag(pos);
      std::string text = src_.substr(pos, start - pos);
      if (start == src_.size()) {
        emit_text(std::move(text), pos);
        break;
      }
      const char type = src_[start + 1];
      const char sign = start + 2 < src_.size() ? src_[start + 2] : '\0';
      if (sign == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (sign != '+' && opt_.lstrip_blocks && type != '{') {
        // jinja2 lexer: strip spaces between the line start and a block or comment tag.
        const size_t l_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        const bool line_starting = pos == 0 || src_[pos - 1] == '\n';
        if (l_pos > 0 || line_starting) {
          const bool blank = std::all_of(text.begin() + l_pos, text.end(), is_space);
          if (blank) text.resize(l_pos);
        }
      }
      emit_text(std::move(text), pos);
      size_t p = start + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      if (type == '#') {
        pos = lex_comment(start, p, strip_next);
      } else if (type == '%' && is_raw(p)) {
        pos = lex_raw(start, p, strip_next);
      } else {
        pos = lex_tag(start, p, type == '%', strip_next);
      }
    }
    tokens_.push_back(Token{TokKind::End, "", pos_of(src_.size())});
    return std::move(tokens_);
  }

 private:
  Pos pos_of(size_t offset) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - 1;
    return Pos{static_cast<int>(it - line_starts_.begin()) + 1, static_cast<int>(offset - *it) + 1};
  }

  [[noreturn]] void error(size_t offset, const std::string& message) const {
    const Pos p = pos_of(offset);
    fail(origin_, ":", p.line, ":", p.col, ": syntax error: ", message);
  }

  size_t find_tag(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i)
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    return src_.size();
  }

  void emit_text(std::string text, size_t offset) {
    if (!text.empty()) tokens_.push_back(Token{TokKind::Text, std::move(text), pos_of(offset)});
  }

  // After a block or comment end: '-' strips following whitespace, trim_blocks one newline.
  size_t after_block_end(size_t p, char sign, bool& strip_next) const {
    if (sign == '-')
      strip_next = true;
    else if (sign != '+' && opt_.trim_blocks && p < src_.size() && src_[p] == '\n')
      ++p;
    return p;
  }

  size_t lex_comment(size_t start, size_t p, bool& strip_next) {
    const size_t end = src_.find("#}", p);
    if (end == std::string::npos) error(start, "missing end of comment tag");
    const char sign = end > p ? src_[end - 1] : '\0';
    return after_block_end(end + 2, sign, strip_next);
  }

  // Matches optional whitespace, `word`, optional whitespace and a block end at p.
  bool match_word_tag(size_t p, const char* word, size_t& end, char& sign) const {
    while (p < src_.size() && is_space(src_[p])) ++p;
    const size_t n = std::strlen(word);
    if (src_.compare(p, n, word) != 0) return false;
    p += n;
    if (p < src_.size() && (is_ident_start(src_[p]) || is_digit(src_[p]))) return false;
    while (p < src_.size() && is_space(src_[p])) ++p;
    sign = '\0';
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
    if (src_.compare(p, 2, "%}") != 0) return false;
    end = p + 2;
    return true;
  }

  bool is_raw(size_t p) const {
    size_t end;
    char sign;
    return match_word_tag(p, "raw", end, sign);
  }

  size_t lex_raw(size_t start, size_t p, bool& strip_next) {
    size_t end;
    char sign;
    match_word_tag(p, "raw", end, sign);
    size_t body = after_block_end(end, sign, strip_next);
    if (strip_next) {
      while (body < src_.size() && is_space(src_[body])) ++body;
      strip_next = false;
    }
    for (size_t i = src_.find("{%", body); i != std::string::npos; i = src_.find("{%", i + 1)) {
      size_t q = i + 2;
      const char open_sign = q < src_.size() ? src_[q] : '\0';
      if (open_sign == '-' || open_sign == '+') ++q;
      size_t tag_end;
      char close_sign;
      if (!match_word_tag(q, "endraw", tag_end, close_sign)) continue;
      std::string text = src_.substr(body, i - body);
      if (open_sign == '-')
        while (!text.empty() && is_space(text.back())) text.pop_back();
      emit_text(std::move(text), body);
      return after_block_end(tag_end, close_sign, strip_next);
    }
    error(start, "missing {% endraw %}");
  }

  size_t lex_tag(size_t start, size_t p, bool block, bool& strip_next) {
    tokens_.push_back(
        Token{block ? TokKind::BlockBegin : TokKind::VarBegin, block ? "{%" : "{{", pos_of(start)});
    const char* close = block ? "%}" : "}}";
    int depth = 0;  // brackets: a '}' inside {{ {'a': 1} }} is not the tag end
    while (true) {
      while (p < src_.size() && is_space(src_[p])) ++p;
      if (p >= src_.size())
        error(start, std::string("unexpected end of template, expected '") + close + "'");
      const char c = src_[p];
      if (depth == 0) {
        if ((c == '-' || c == '+') && src_.compare(p + 1, 2, close) == 0) {
          tokens_.push_back(Token{block ? TokKind::BlockEnd : TokKind::VarEnd, close, pos_of(p)});
          if (!block) {
            if (c == '-') strip_next = true;
            return p + 3;
          }
          return after_block_end(p + 3, c, strip_next);
        }
        if (src_.compare(p, 2, close) == 0) {
          tokens_.push_back(Token{block ? TokKind::BlockEnd : TokKind::VarEnd, close, pos_of(p)});
          return block ? after_block_end(p + 2, '\0', strip_next) : p + 2;
        }
      }
      const size_t tok_start = p;
      if (is_ident_start(c)) {
        while (p < src_.size() && (is_ident_start(src_[p]) || is_digit(src_[p]))) ++p;
        tokens_.push_back(
            Token{TokKind::Name, src_.substr(tok_start, p - tok_start), pos_of(tok_start)});
      } else if (is_digit(c)) {
        p = lex_number(p);
      } else if (c == '\'' || c == '"') {
        p = lex_string(p);
      } else {
        static const char* const kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*",
                                           "/",  "%",  "~",  "<",  ">",  "=",  ".", ",", ":",
                                           "|",  "(",  ")",  "[",  "]",  "{",  "}", ";"};
        const char* found = nullptr;
        for (const char* op : kOps) {
          if (src_.compare(p, std::strlen(op), op) == 0) {
            found = op;
            break;
          }
        }
        if (!found) error(p, std::string("unexpected character '") + c + "'");
        const std::string op = found;
        if (op == "(" || op == "[" || op == "{") ++depth;
        if (op == ")" || op == "]" || op == "}") --depth;
        if (depth < 0) depth = 0;
        tokens_.push_back(Token{TokKind::Op, op, pos_of(p)});
        p += op.size();
      }
    }
  }

  size_t lex_number(size_t p) {
    const size_t start = p;
    auto digits = [&] {
      while (p < src_.size() && (is_digit(src_[p]) ||
                                 (src_[p] == '_' && p + 1 < src_.size() && is_digit(src_[p + 1]))))
        ++p;
    };
    digits();
    bool is_float = false;
    const bool after_dot =
        !tokens_.empty() && tokens_.back().kind == TokKind::Op && tokens_.back().text == ".";
    if (!after_dot && p + 1 < src_.size() && src_[p] == '.' && is_digit(src_[p + 1])) {
      ++p;
      digits();
      is_float = true;
    }
    if (!after_dot && p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
      size_t q = p + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && is_digit(src_[q])) {
        p = q;
        digits();
        is_float = true;
      }
    }
    std::string text;
    for (size_t i = start; i < p; ++i)
      if (src_[i] != '_') text += src_[i];
    tokens_.push_back(Token{is_float ? TokKind::Float : TokKind::Int, text, pos_of(start)});
    return p;
  }

  // Python's unicode-escape decoding of a string literal's body.
  size_t lex_string(size_t p) {
    const size_t start = p;
    const char quote = src_[p++];
    std::string out;
    while (true) {
      if (p >= src_.size()) error(start, "unterminated string literal");
      const char c = src_[p];
      if (c == quote) {
        ++p;
        break;
      }
      if (c != '\\' || p + 1 >= src_.size()) {
        out += c;
        ++p;
        continue;
      }
      const char e = src_[p + 1];
      p += 2;
      auto hex = [&](int n) {
        uint32_t v = 0;
        for (int k = 0; k < n; ++k, ++p) {
          if (p >= src_.size() || !std::isxdigit(static_cast<unsigned char>(src_[p])))
            error(start, "truncated \\x/\\u escape in string literal");
          const char h = src_[p];
          v = v * 16 + (is_digit(h) ? h - '0' : (std::tolower(h) - 'a' + 10));
        }
        return v;
      };
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case '\\':
          out += '\\';
          break;
        case '\'':
          out += '\'';
          break;
        case '"':
          out += '"';
          break;
        case 'a':
          out += '\a';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'v':
          out += '\v';
          break;
        case '\n':
          break;
        case 'x':
          append_utf8(out, hex(2));
          break;
        case 'u':
          append_utf8(out, hex(4));
          break;
        case 'U':
          append_utf8(out, hex(8));
          break;
        default:
          if (e >= '0' && e <= '7') {
            uint32_t v = e - '0';
            for (int k = 0; k < 2 && p < src_.size() && src_[p] >= '0' && src_[p] <= '7'; ++k)
              v = v * 8 + (src_[p++] - '0');
            append_utf8(out, v);
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    tokens_.push_back(Token{TokKind::String, std::move(out), pos_of(start)});
    return p;
  }

  std::string src_;
  const std::string& origin_;
  LexOptions opt_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source, const std::string& origin,
                            const LexOptions& options) {
  // jinja2 normalises every newline to "\n" and drops one trailing newline.
  std::string src;
  src.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      src += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      src += source[i];
    }
  }
  if (!options.keep_trailing_newline && !src.empty() && src.back() == '\n') src.pop_back();
  return Lexer(std::move(src), origin, options).run();
}

}  // namespace lathe::jinja
