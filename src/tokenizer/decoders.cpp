// Decoders: tokenizers/src/decoders/*.rs. Each transforms the list of token strings; the
// tokenizer joins the final list.
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/byte_level.h"
#include "tokenizer/components.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace lathe::tok {

namespace {

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  std::string out;
  size_t prev = 0;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, prev)) {
    out.append(s, prev, at - prev);
    out += to;
    prev = at + from.size();
  }
  out.append(s, prev, std::string::npos);
  s = std::move(out);
}

// decoders/wordpiece.rs `cleanup`: undoes the spaces BERT-style tokenization puts around
// punctuation and contractions.
void cleanup(std::string& s) {
  replace_all(s, " .", ".");
  replace_all(s, " ?", "?");
  replace_all(s, " !", "!");
  replace_all(s, " ,", ",");
  replace_all(s, " ' ", "'");
  replace_all(s, " n't", "n't");
  replace_all(s, " 'm", "'m");
  replace_all(s, " do not", " don't");
  replace_all(s, " 's", "'s");
  replace_all(s, " 've", "'ve");
  replace_all(s, " 're", "'re");
}

class ByteLevelDec : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const auto& t : tokens) {
      const size_t mark = bytes.size();
      size_t i = 0;
      bool ok = true;
      while (i < t.size()) {
        const int b = unicode_to_byte(next_cp(t, i));
        if (b < 0) {
          ok = false;
          break;
        }
        bytes += static_cast<char>(b);
      }
      if (!ok) {
        bytes.resize(mark);
        bytes += t;
      }
    }
    tokens.assign(1, utf8_lossy(bytes));
  }
};

class MetaspaceDec : public Decoder {
 public:
  MetaspaceDec(char32_t rep, bool prepend) : prepend_(prepend) { append_utf8(rep_, rep); }
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t k = 0; k < tokens.size(); ++k)
      replace_all(tokens[k], rep_, k == 0 && prepend_ ? "" : " ");
  }

 private:
  std::string rep_;
  bool prepend_;
};

class ByteFallbackDec : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    size_t pending_n = 0;
    auto flush = [&] {
      if (!pending_n) return;
      if (find_invalid_utf8(pending) == std::string::npos) {
        out.push_back(pending);
      } else {
        for (size_t k = 0; k < pending_n; ++k) out.emplace_back("\xEF\xBF\xBD");
      }
      pending.clear();
      pending_n = 0;
    };
    for (auto& t : tokens) {
      int b = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') b = parse_hex(t[3], t[4]);
      if (b >= 0) {
        pending += static_cast<char>(b);
        ++pending_n;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }

 private:
  static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  // Rust's u8::from_str_radix(.., 16), which also accepts a leading '+'.
  static int parse_hex(char a, char b) {
    const int lo = hexval(b);
    if (lo < 0) return -1;
    if (a == '+') return lo;
    const int hi = hexval(a);
    return hi < 0 ? -1 : hi * 16 + lo;
  }
};

class FuseDec : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

class StripDec : public Decoder {
 public:
  StripDec(char32_t c, size_t start, size_t stop) : c_(c), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      std::vector<size_t> starts;  // byte offset of each character
      size_t i = 0;
      std::vector<char32_t> cps;
      while (i < t.size()) {
        starts.push_back(i);
        cps.push_back(next_cp(t, i));
      }
      size_t b = 0, e = cps.size();
      for (size_t k = 0; k < start_ && k < cps.size() && cps[k] == c_; ++k) b = k + 1;
      for (size_t k = 0; k < stop_ && k < cps.size() && cps[cps.size() - 1 - k] == c_; ++k)
        e = cps.size() - 1 - k;
      if (b >= e) {  // upstream panics here; an empty token is the sane answer
        t.clear();
        continue;
      }
      const size_t bb = starts[b], eb = e < starts.size() ? starts[e] : t.size();
      t = t.substr(bb, eb - bb);
    }
  }

 private:
  char32_t c_;
  size_t start_, stop_;
};

class ReplaceDec : public Decoder {
 public:
  ReplaceDec(PatternSpec p, std::string content, const Where& where)
      : pattern_(p.text), content_(std::move(content)) {
    if (p.is_regex) re_ = std::make_unique<Regex>(p.text, where.str() + ": field \"pattern\"");
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      if (!re_) {
        replace_all(t, pattern_, content_);
        continue;
      }
      std::string out;
      size_t prev = 0;
      for (auto [b, e] : re_->find_all(t)) {
        out.append(t, prev, b - prev);
        out += content_;
        prev = e;
      }
      out.append(t, prev, std::string::npos);
      t = std::move(out);
    }
  }

 private:
  std::string pattern_, content_;
  std::unique_ptr<Regex> re_;
};

class WordPieceDec : public Decoder {
 public:
  WordPieceDec(std::string prefix, bool cleanup) : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t k = 0; k < tokens.size(); ++k) {
      auto& t = tokens[k];
      if (k != 0) {
        if (t.compare(0, prefix_.size(), prefix_) == 0)
          t.erase(0, prefix_.size());
        else
          t.insert(0, " ");
      }
      if (cleanup_) cleanup(t);
    }
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

class BpeDec : public Decoder {
 public:
  explicit BpeDec(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t k = 0; k < tokens.size(); ++k)
      replace_all(tokens[k], suffix_, k + 1 == tokens.size() ? "" : " ");
  }

 private:
  std::string suffix_;
};

class CtcDec : public Decoder {
 public:
  CtcDec(std::string pad, std::string delim, bool cleanup)
      : pad_(std::move(pad)), delim_(std::move(delim)), cleanup_(cleanup) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    for (size_t k = 0; k < tokens.size(); ++k) {
      if (k > 0 && tokens[k] == tokens[k - 1]) continue;  // dedup consecutive repeats
      std::string t = tokens[k];
      replace_all(t, pad_, "");
      if (cleanup_) {
        cleanup(t);
        replace_all(t, delim_, " ");
      }
      if (!t.empty()) out.push_back(std::move(t));
    }
    tokens = std::move(out);
  }

 private:
  std::string pad_, delim_;
  bool cleanup_;
};

class SequenceDec : public Decoder {
 public:
  explicit SequenceDec(std::vector<std::unique_ptr<Decoder>> p) : parts_(std::move(p)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts_) p->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

size_t count_field(const JsonFields& f, const std::string& key) {
  const int64_t v = f.get_or<int64_t>(key, 0);
  if (v < 0) fail(f.origin(), ": field \"", key, "\" must not be negative");
  return static_cast<size_t>(v);
}

}  // namespace

std::unique_ptr<Decoder> make_decoder(const Json& j, const Where& at, int depth) {
  const std::string type = component_type(j, at);
  const Where where = at.typed(type);
  const JsonFields f(j, where.str());
  if (type == "ByteLevel") return std::make_unique<ByteLevelDec>();
  if (type == "Metaspace") {
    const char32_t rep = f.has("replacement") ? char_field(f, "replacement") : U'\u2581';
    bool prepend = true;
    if (f.has("prepend_scheme")) {
      const std::string s = f.get<std::string>("prepend_scheme");
      if (s != "always" && s != "first" && s != "never")
        where.fail("field \"prepend_scheme\": unknown value \"", s, "\"");
      prepend = s != "never";
    } else if (f.has("add_prefix_space")) {
      prepend = f.get<bool>("add_prefix_space");
    }
    return std::make_unique<MetaspaceDec>(rep, prepend);
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDec>();
  if (type == "Fuse") return std::make_unique<FuseDec>();
  if (type == "Strip")
    return std::make_unique<StripDec>(char_field(f, "content"), count_field(f, "start"),
                                      count_field(f, "stop"));
  if (type == "Replace")
    return std::make_unique<ReplaceDec>(read_pattern(f, "pattern"), f.get<std::string>("content"),
                                        where);
  if (type == "WordPiece")
    return std::make_unique<WordPieceDec>(f.get_or<std::string>("prefix", "##"),
                                          f.get_or<bool>("cleanup", true));
  if (type == "BPEDecoder")
    return std::make_unique<BpeDec>(f.get_or<std::string>("suffix", "</w>"));
  if (type == "CTC")
    return std::make_unique<CtcDec>(f.get_or<std::string>("pad_token", "<pad>"),
                                    f.get_or<std::string>("word_delimiter_token", "|"),
                                    f.get_or<bool>("cleanup", true));
  if (type == "Sequence") {
    if (depth >= kMaxSequenceDepth) where.fail("Sequence nested deeper than ", kMaxSequenceDepth);
    const Json& arr = array_field(f, "decoders");
    std::vector<std::unique_ptr<Decoder>> parts;
    for (size_t i = 0; i < arr.size(); ++i)
      parts.push_back(make_decoder(arr[i], at.child(cat(".decoders[", i, "]")), depth + 1));
    return std::make_unique<SequenceDec>(std::move(parts));
  }
  where.fail("unknown decoder type \"", type, "\"");
}

}  // namespace lathe::tok
