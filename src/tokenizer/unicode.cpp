#include "tokenizer/unicode.h"

#include <cstdlib>
#include <memory>

#include <unicode/uchar.h>
#include <unicode/uscript.h>
#include <utf8proc.h>

#include "core/error.h"

namespace lathe::tok {

size_t cp_len(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xE) return 3;
  return 4;
}

char32_t next_cp(std::string_view s, size_t& i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = b(i);
  if (lead < 0x80) {
    ++i;
    return lead;
  }
  const size_t n = cp_len(lead);
  if (i + n > s.size()) {  // defensive: callers pass valid UTF-8
    ++i;
    return 0xFFFD;
  }
  char32_t cp = n == 2 ? (lead & 0x1F) : n == 3 ? (lead & 0x0F) : (lead & 0x07);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (b(i + k) & 0x3F);
  i += n;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

namespace {

// Length of the valid sequence at s[i], or 0 with `bad` = length of the maximal invalid
// subpart (Unicode "substitution of maximal subparts", which Rust's lossy decoding follows).
size_t valid_seq(std::string_view s, size_t i, size_t& bad) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  bad = 1;
  if (c < 0x80) return 1;
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    need = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 2;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (size_t k = 1; k <= need; ++k) {
    if (i + k >= s.size()) return 0;
    const unsigned char x = b(i + k);
    const unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (x < l || x > h) return 0;
    bad = k + 1;
  }
  return need + 1;
}

}  // namespace

size_t find_invalid_utf8(std::string_view s) {
  size_t i = 0, bad = 0;
  while (i < s.size()) {
    const size_t n = valid_seq(s, i, bad);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

std::string utf8_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0, bad = 0;
  while (i < s.size()) {
    const size_t n = valid_seq(s, i, bad);
    if (n) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      i += bad;
    }
  }
  return out;
}

bool is_rust_whitespace(char32_t c) {
  return (c >= 0x9 && c <= 0xD) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

static utf8proc_category_t cat_of(char32_t c) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}

bool is_rust_numeric(char32_t c) {
  const auto k = cat_of(c);
  return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

bool is_punctuation(char32_t c) {
  if (c < 0x80)
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
           (c >= 0x7B && c <= 0x7E);
  const auto k = cat_of(c);
  return k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO;
}

bool is_mark(char32_t c) {
  const auto k = cat_of(c);
  return k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_MC || k == UTF8PROC_CATEGORY_ME;
}

bool is_nonspacing_mark(char32_t c) {
  return cat_of(c) == UTF8PROC_CATEGORY_MN;
}

bool is_other(char32_t c) {
  const auto k = cat_of(c);
  return k == UTF8PROC_CATEGORY_CN || k >= UTF8PROC_CATEGORY_CC;
}

bool is_word_char(char32_t c) {
  const auto u = static_cast<UChar32>(c);
  if (u_hasBinaryProperty(u, UCHAR_ALPHABETIC) || u_hasBinaryProperty(u, UCHAR_JOIN_CONTROL))
    return true;
  const auto k = cat_of(c);
  return is_mark(c) || k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_PC;
}

std::string normalize(std::string_view s, NormForm form) {
  if (s.empty()) return {};
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormForm::NFC:
      options |= UTF8PROC_COMPOSE;
      break;
    case NormForm::NFD:
      options |= UTF8PROC_DECOMPOSE;
      break;
    case NormForm::NFKC:
      options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
      break;
    case NormForm::NFKD:
      options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
      break;
  }
  utf8proc_uint8_t* out = nullptr;
  const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                              static_cast<utf8proc_ssize_t>(s.size()), &out,
                              static_cast<utf8proc_option_t>(options));
  if (n < 0) fail("unicode normalization failed: ", utf8proc_errmsg(n));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> guard(out, &std::free);
  return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
}

std::string lowercase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const char32_t c = next_cp(s, i);
    if (c < 0x80) {
      out += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
    } else if (c == 0x130) {  // the one unconditional multi-character lowercase mapping
      out += "i\xCC\x87";
    } else {
      append_utf8(out, static_cast<char32_t>(u_tolower(static_cast<UChar32>(c))));
    }
  }
  return out;
}

int fixed_script(char32_t c) {
  // Mirrors tokenizers' pre_tokenizers::unicode_scripts::fixed_script.
  if (c == 0x30FC) return USCRIPT_HAN;
  if (c == ' ') return -1;
  UErrorCode err = U_ZERO_ERROR;
  const int s = uscript_getScript(static_cast<UChar32>(c), &err);
  // Characters without a script (unassigned, private use) are "Any" upstream.
  if (U_FAILURE(err) || s == USCRIPT_UNKNOWN) return -1;
  if (s == USCRIPT_HIRAGANA || s == USCRIPT_KATAKANA) return USCRIPT_HAN;
  return s;
}

std::vector<size_t> grapheme_lengths(std::string_view s) {
  std::vector<size_t> out;
  utf8proc_int32_t state = 0;
  size_t i = 0, start = 0;
  char32_t prev = 0;
  bool first = true;
  while (i < s.size()) {
    const size_t at = i;
    const char32_t c = next_cp(s, i);
    if (!first && utf8proc_grapheme_break_stateful(static_cast<utf8proc_int32_t>(prev),
                                                   static_cast<utf8proc_int32_t>(c), &state)) {
      out.push_back(at - start);
      start = at;
    }
    first = false;
    prev = c;
  }
  if (i > start) out.push_back(i - start);
  return out;
}

}  // namespace lathe::tok
