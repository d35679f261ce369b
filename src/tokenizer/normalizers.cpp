// Normalizers: tokenizers/src/normalizers/{unicode,utils,strip,replace,prepend,bert}.rs.
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/components.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace lathe::tok {

std::string component_type(const Json& j, const Where& where) {
  if (!j.is_object()) where.fail("expected a JSON object, found ", j.type_name());
  auto it = j.find("type");
  if (it == j.end() || !it->is_string()) where.fail("missing string field \"type\"");
  return it->get<std::string>();
}

const Json& array_field(const JsonFields& f, const std::string& key) {
  const Json& v = f.at(key);
  if (!v.is_array())
    fail(f.origin(), ": field \"", key, "\" must be an array, found ", v.type_name());
  return v;
}

PatternSpec read_pattern(const JsonFields& f, const std::string& key) {
  const Json& v = f.at(key);
  if (v.is_string()) return {false, v.get<std::string>()};  // legacy plain string
  if (!v.is_object() || v.size() != 1)
    fail(f.origin(), ": field \"", key, "\" must be {\"String\": ...} or {\"Regex\": ...}");
  JsonFields p(v, cat(f.origin(), ": field \"", key, "\""));
  if (p.has("String")) return {false, p.get<std::string>("String")};
  if (p.has("Regex")) return {true, p.get<std::string>("Regex")};
  fail(f.origin(), ": field \"", key, "\" must be {\"String\": ...} or {\"Regex\": ...}");
}

char32_t char_field(const JsonFields& f, const std::string& key) {
  const std::string s = f.get<std::string>(key);
  if (s.empty() || find_invalid_utf8(s) != std::string::npos)
    fail(f.origin(), ": field \"", key, "\" must be a single character");
  size_t i = 0;
  const char32_t c = next_cp(s, i);
  if (i != s.size()) fail(f.origin(), ": field \"", key, "\" must be a single character");
  return c;
}

namespace {

class UnicodeNorm : public Normalizer {
 public:
  explicit UnicodeNorm(NormForm f) : form_(f) {}
  std::string normalize(std::string s) const override { return tok::normalize(s, form_); }

 private:
  NormForm form_;
};

class Lowercase : public Normalizer {
 public:
  std::string normalize(std::string s) const override { return lowercase(s); }
};

class Strip : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  std::string normalize_tracked(std::string s, bool& at_start) const override {
    std::string out = normalize(s);
    if (left_ && !out.empty() && out.size() != s.size() && s.compare(0, out.size(), out) != 0)
      at_start = false;  // leading whitespace went
    return out;
  }
  std::string normalize(std::string s) const override {
    size_t b = 0, e = s.size();
    if (left_) {
      while (b < e) {
        size_t i = b;
        if (!is_rust_whitespace(next_cp(s, i))) break;
        b = i;
      }
    }
    if (right_) {
      while (e > b) {
        size_t k = e - 1;
        while (k > b && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
        size_t i = k;
        if (!is_rust_whitespace(next_cp(s, i))) break;
        e = k;
      }
    }
    return s.substr(b, e - b);
  }

 private:
  bool left_, right_;
};

class StripAccents : public Normalizer {
 public:
  std::string normalize_tracked(std::string s, bool& at_start) const override {
    size_t i = 0;
    if (!s.empty() && is_mark(next_cp(s, i))) at_start = false;
    return normalize(std::move(s));
  }
  std::string normalize(std::string s) const override {
    std::string out;
    size_t i = 0;
    while (i < s.size()) {
      const size_t at = i;
      if (!is_mark(next_cp(s, i))) out.append(s, at, i - at);
    }
    return out;
  }
};

class Replace : public Normalizer {
 public:
  Replace(PatternSpec p, std::string content, const Where& where)
      : pattern_(p.text), content_(std::move(content)) {
    if (p.is_regex) re_ = std::make_unique<Regex>(p.text, where.str() + ": field \"pattern\"");
  }
  std::string normalize(std::string s) const override {
    std::string out;
    size_t prev = 0;
    if (re_) {
      for (auto [b, e] : re_->find_all(s)) {
        out.append(s, prev, b - prev);
        out += content_;
        prev = e;
      }
    } else {
      if (pattern_.empty()) return s;
      for (size_t at = s.find(pattern_); at != std::string::npos; at = s.find(pattern_, prev)) {
        out.append(s, prev, at - prev);
        out += content_;
        prev = at + pattern_.size();
      }
    }
    out.append(s, prev, std::string::npos);
    return out;
  }

 private:
  std::string pattern_, content_;
  std::unique_ptr<Regex> re_;
};

class Prepend : public Normalizer {
 public:
  explicit Prepend(std::string p) : prepend_(std::move(p)) {}
  std::string normalize(std::string s) const override { return s.empty() ? s : prepend_ + s; }

 private:
  std::string prepend_;
};

bool is_chinese_char(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// tokenizers/src/normalizers/bert.rs
class BertNormalizer : public Normalizer {
 public:
  BertNormalizer(bool clean, bool chinese, bool strip, bool lower)
      : clean_(clean), chinese_(chinese), strip_(strip), lower_(lower) {}
  std::string normalize(std::string s) const override {
    if (clean_ || chinese_) {
      std::string out;
      size_t i = 0;
      while (i < s.size()) {
        const size_t at = i;
        const char32_t c = next_cp(s, i);
        if (clean_) {
          const bool ws = c == '\t' || c == '\n' || c == '\r' || is_rust_whitespace(c);
          const bool ctrl = !(c == '\t' || c == '\n' || c == '\r') && is_other(c);
          if (c == 0 || c == 0xFFFD || ctrl) continue;
          if (ws) {
            out += ' ';
            continue;
          }
        }
        if (chinese_ && is_chinese_char(c)) {
          out += ' ';
          out.append(s, at, i - at);
          out += ' ';
        } else {
          out.append(s, at, i - at);
        }
      }
      s = std::move(out);
    }
    if (strip_) {  // bert.rs strips only nonspacing marks (Mn), unlike StripAccents
      const std::string nfd = tok::normalize(s, NormForm::NFD);
      s.clear();
      size_t i = 0;
      while (i < nfd.size()) {
        const size_t at = i;
        if (!is_nonspacing_mark(next_cp(nfd, i))) s.append(nfd, at, i - at);
      }
    }
    if (lower_) s = lowercase(s);
    return s;
  }

 private:
  bool clean_, chinese_, strip_, lower_;
};

class SequenceNorm : public Normalizer {
 public:
  explicit SequenceNorm(std::vector<std::unique_ptr<Normalizer>> parts)
      : parts_(std::move(parts)) {}
  std::string normalize_tracked(std::string s, bool& at_start) const override {
    for (const auto& p : parts_) s = p->normalize_tracked(std::move(s), at_start);
    return s;
  }
  std::string normalize(std::string s) const override {
    for (const auto& p : parts_) s = p->normalize(std::move(s));
    return s;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const Json& j, const Where& at, int depth) {
  const std::string type = component_type(j, at);
  const Where where = at.typed(type);
  const JsonFields f(j, where.str());
  if (type == "NFC") return std::make_unique<UnicodeNorm>(NormForm::NFC);
  if (type == "NFD") return std::make_unique<UnicodeNorm>(NormForm::NFD);
  if (type == "NFKC") return std::make_unique<UnicodeNorm>(NormForm::NFKC);
  if (type == "NFKD") return std::make_unique<UnicodeNorm>(NormForm::NFKD);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "StripAccents") return std::make_unique<StripAccents>();
  if (type == "Strip")
    return std::make_unique<Strip>(f.get_or<bool>("strip_left", true),
                                   f.get_or<bool>("strip_right", true));
  if (type == "Replace")
    return std::make_unique<Replace>(read_pattern(f, "pattern"), f.get<std::string>("content"),
                                     where);
  if (type == "Prepend") return std::make_unique<Prepend>(f.get<std::string>("prepend"));
  if (type == "Precompiled") {
    const Json& blob = f.at("precompiled_charsmap");
    if (blob.is_string()) return make_precompiled(blob.get<std::string>(), where);
    where.fail("field \"precompiled_charsmap\" must be a base64 string");
  }
  if (type == "BertNormalizer") {
    const bool lower = f.get_or<bool>("lowercase", true);
    const bool strip = f.has("strip_accents") ? f.get<bool>("strip_accents") : lower;
    return std::make_unique<BertNormalizer>(f.get_or<bool>("clean_text", true),
                                            f.get_or<bool>("handle_chinese_chars", true), strip,
                                            lower);
  }
  if (type == "Sequence") {
    if (depth >= kMaxSequenceDepth) where.fail("Sequence nested deeper than ", kMaxSequenceDepth);
    const Json& arr = array_field(f, "normalizers");
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (size_t i = 0; i < arr.size(); ++i)
      parts.push_back(make_normalizer(arr[i], at.child(cat(".normalizers[", i, "]")), depth + 1));
    return std::make_unique<SequenceNorm>(std::move(parts));
  }
  where.fail("unknown normalizer type \"", type, "\"");
}

}  // namespace lathe::tok
