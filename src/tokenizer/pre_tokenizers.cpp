// Pre-tokenizers: tokenizers/src/pre_tokenizers/*.rs and NormalizedString::split's behaviours.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/byte_level.h"
#include "tokenizer/components.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace lathe::tok {

namespace {

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

struct Span {
  size_t b, e;
  bool is_match;
};

// Applies a split behaviour to the (match / non-match) spans covering `in` and appends the
// non-empty resulting pieces to `out`.
void emit_split(const Piece& in, std::vector<Span> spans, Behavior behavior, bool invert,
                std::vector<Piece>& out) {
  if (invert)
    for (auto& s : spans) s.is_match = !s.is_match;
  std::vector<Span> res;
  switch (behavior) {
    case Behavior::Removed:
      for (const auto& s : spans)
        if (!s.is_match) res.push_back(s);
      break;
    case Behavior::Isolated:
      res = std::move(spans);
      break;
    case Behavior::MergedWithPrevious: {
      bool prev_match = false;
      for (const auto& s : spans) {
        if (s.is_match && !prev_match && !res.empty())
          res.back().e = s.e;
        else
          res.push_back({s.b, s.e, false});
        prev_match = s.is_match;
      }
      break;
    }
    case Behavior::MergedWithNext: {
      bool prev_match = false;
      for (size_t k = spans.size(); k-- > 0;) {
        const auto& s = spans[k];
        if (s.is_match && !prev_match && !res.empty())
          res.back().b = s.b;
        else
          res.push_back({s.b, s.e, false});
        prev_match = s.is_match;
      }
      std::reverse(res.begin(), res.end());
      break;
    }
    case Behavior::Contiguous: {
      bool prev_match = false;
      for (const auto& s : spans) {
        if (s.is_match == prev_match && !res.empty())
          res.back().e = s.e;
        else
          res.push_back({s.b, s.e, false});
        prev_match = s.is_match;
      }
      break;
    }
  }
  for (const auto& s : res)
    if (s.e > s.b) out.push_back(Piece{in.text.substr(s.b, s.e - s.b), in.at_start && s.b == 0});
}

// Spans from a list of match ranges (tokenizers' Pattern::find_matches).
std::vector<Span> spans_from_matches(size_t len, const std::vector<std::pair<size_t, size_t>>& m) {
  std::vector<Span> spans;
  if (len == 0) return {{0, 0, false}};
  size_t prev = 0;
  for (auto [b, e] : m) {
    if (prev != b) spans.push_back({prev, b, false});
    spans.push_back({b, e, true});
    prev = e;
  }
  if (prev != len) spans.push_back({prev, len, false});
  return spans;
}

// Each character satisfying `pred` is a match of its own.
template <class Pred>
std::vector<Span> char_spans(const std::string& s, Pred pred) {
  std::vector<std::pair<size_t, size_t>> m;
  size_t i = 0;
  while (i < s.size()) {
    const size_t b = i;
    if (pred(next_cp(s, i))) m.emplace_back(b, i);
  }
  return spans_from_matches(s.size(), m);
}

template <class F>
void for_each_piece(std::vector<Piece>& pieces, F f) {
  std::vector<Piece> out;
  out.reserve(pieces.size());
  for (const auto& p : pieces) f(p, out);
  pieces = std::move(out);
}

Behavior read_behavior(const JsonFields& f, const Where& where, Behavior fallback) {
  if (!f.has("behavior")) return fallback;
  const std::string b = f.get<std::string>("behavior");
  if (b == "Removed") return Behavior::Removed;
  if (b == "Isolated") return Behavior::Isolated;
  if (b == "MergedWithPrevious") return Behavior::MergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::MergedWithNext;
  if (b == "Contiguous") return Behavior::Contiguous;
  where.fail("field \"behavior\": unknown value \"", b, "\"");
}

class Split : public PreTokenizer {
 public:
  Split(PatternSpec p, Behavior b, bool invert, const Where& where)
      : literal_(p.text), behavior_(b), invert_(invert) {
    if (p.is_regex) re_ = std::make_unique<Regex>(p.text, where.str() + ": field \"pattern\"");
  }
  void split(std::vector<Piece>& pieces) const override {
    for_each_piece(pieces, [&](const Piece& p, std::vector<Piece>& out) {
      std::vector<std::pair<size_t, size_t>> m;
      if (re_) {
        m = re_->find_all(p.text);
      } else if (!literal_.empty()) {
        for (size_t at = p.text.find(literal_); at != std::string::npos;
             at = p.text.find(literal_, at + literal_.size()))
          m.emplace_back(at, at + literal_.size());
      }
      emit_split(p, spans_from_matches(p.text.size(), m), behavior_, invert_, out);
    });
  }

 private:
  std::string literal_;
  std::unique_ptr<Regex> re_;
  Behavior behavior_;
  bool invert_;
};

template <class Pred>
class CharSplit : public PreTokenizer {
 public:
  CharSplit(Pred pred, Behavior b) : pred_(pred), behavior_(b) {}
  void split(std::vector<Piece>& pieces) const override {
    for_each_piece(pieces, [&](const Piece& p, std::vector<Piece>& out) {
      emit_split(p, char_spans(p.text, pred_), behavior_, false, out);
    });
  }

 private:
  Pred pred_;
  Behavior behavior_;
};

template <class Pred>
std::unique_ptr<PreTokenizer> char_split(Pred pred, Behavior b) {
  return std::make_unique<CharSplit<Pred>>(pred, b);
}

// tokenizers/src/pre_tokenizers/byte_level.rs
class ByteLevelPre : public PreTokenizer {
 public:
  ByteLevelPre(bool add_prefix_space, bool use_regex, const Where& where)
      : add_prefix_space_(add_prefix_space) {
    if (use_regex)
      re_ = std::make_unique<Regex>(
          R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)",
          where.str());
  }
  void split(std::vector<Piece>& pieces) const override {
    for_each_piece(pieces, [&](const Piece& in, std::vector<Piece>& out) {
      Piece p = in;
      if (add_prefix_space_ && (p.text.empty() || p.text[0] != ' ')) p.text.insert(0, " ");
      const size_t first = out.size();
      if (re_)
        emit_split(p, spans_from_matches(p.text.size(), re_->find_all(p.text)), Behavior::Isolated,
                   false, out);
      else if (!p.text.empty())
        out.push_back(std::move(p));
      for (size_t k = first; k < out.size(); ++k) out[k].text = bytes_to_unicode(out[k].text);
    });
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> re_;
};

enum class PrependScheme { Always, First, Never };

// tokenizers/src/pre_tokenizers/metaspace.rs
class MetaspacePre : public PreTokenizer {
 public:
  MetaspacePre(char32_t replacement, PrependScheme scheme, bool split)
      : scheme_(scheme), split_(split) {
    append_utf8(rep_, replacement);
  }
  void split(std::vector<Piece>& pieces) const override {
    for_each_piece(pieces, [&](const Piece& in, std::vector<Piece>& out) {
      Piece p{std::string(), in.at_start};
      for (char c : in.text) {
        if (c == ' ')
          p.text += rep_;
        else
          p.text += c;
      }
      const bool starts = p.text.compare(0, rep_.size(), rep_) == 0;
      if (!starts &&
          (scheme_ == PrependScheme::Always || (scheme_ == PrependScheme::First && in.at_start)))
        p.text.insert(0, rep_);
      if (!split_) {
        if (!p.text.empty()) out.push_back(std::move(p));
        return;
      }
      std::vector<std::pair<size_t, size_t>> m;
      for (size_t at = p.text.find(rep_); at != std::string::npos;
           at = p.text.find(rep_, at + rep_.size()))
        m.emplace_back(at, at + rep_.size());
      emit_split(p, spans_from_matches(p.text.size(), m), Behavior::MergedWithNext, false, out);
    });
  }

 private:
  std::string rep_;
  PrependScheme scheme_;
  bool split_;
};

// tokenizers/src/pre_tokenizers/unicode_scripts/pre_tokenizer.rs
class UnicodeScripts : public PreTokenizer {
 public:
  void split(std::vector<Piece>& pieces) const override {
    for_each_piece(pieces, [&](const Piece& p, std::vector<Piece>& out) {
      std::vector<size_t> cuts;
      int last = -2;  // "None"
      size_t i = 0;
      while (i < p.text.size()) {
        const size_t at = i;
        const int script = fixed_script(next_cp(p.text, i));
        if (script != -1 && last != -1 && last != script) cuts.push_back(at);
        if (script != -1) last = script;
      }
      cuts.push_back(p.text.size());
      // As upstream, text before the first cut (leading spaces) is dropped.
      for (size_t k = 0; k + 1 < cuts.size(); ++k)
        if (cuts[k + 1] > cuts[k])
          out.push_back(
              Piece{p.text.substr(cuts[k], cuts[k + 1] - cuts[k]), p.at_start && cuts[k] == 0});
    });
  }
};

class SequencePre : public PreTokenizer {
 public:
  explicit SequencePre(std::vector<std::unique_ptr<PreTokenizer>> parts)
      : parts_(std::move(parts)) {}
  void split(std::vector<Piece>& pieces) const override {
    for (const auto& p : parts_) p->split(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

// `\w+|[^\w\s]+`, keeping matches. Written out rather than run through the system
// Oniguruma, whose \w (6.9) lacks Join_Control while the crate's bundled one has it.
class WhitespacePre : public PreTokenizer {
 public:
  void split(std::vector<Piece>& pieces) const override {
    for_each_piece(pieces, [&](const Piece& p, std::vector<Piece>& out) {
      const std::string& s = p.text;
      size_t i = 0;
      while (i < s.size()) {
        size_t j = i;
        const char32_t c = next_cp(s, j);
        const int kind = is_word_char(c) ? 0 : is_rust_whitespace(c) ? 1 : 2;
        size_t e = j;
        while (e < s.size()) {
          size_t k = e;
          const char32_t d = next_cp(s, k);
          const int dk = is_word_char(d) ? 0 : is_rust_whitespace(d) ? 1 : 2;
          if (dk != kind) break;
          e = k;
        }
        if (kind != 1) out.push_back(Piece{s.substr(i, e - i), p.at_start && i == 0});
        i = e;
      }
    });
  }
};

class BertPre : public PreTokenizer {
 public:
  void split(std::vector<Piece>& pieces) const override {
    for_each_piece(pieces, [&](const Piece& p, std::vector<Piece>& out) {
      std::vector<Piece> words;
      emit_split(p, char_spans(p.text, is_rust_whitespace), Behavior::Removed, false, words);
      for (const auto& w : words)
        emit_split(w, char_spans(w.text, is_punctuation), Behavior::Isolated, false, out);
    });
  }
};

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& j, const Where& at, int depth) {
  const std::string type = component_type(j, at);
  const Where where = at.typed(type);
  const JsonFields f(j, where.str());
  if (type == "ByteLevel")
    return std::make_unique<ByteLevelPre>(f.get_or<bool>("add_prefix_space", true),
                                          f.get_or<bool>("use_regex", true), where);
  if (type == "Split") {
    return std::make_unique<Split>(read_pattern(f, "pattern"),
                                   read_behavior(f, where, Behavior::Isolated),
                                   f.get_or<bool>("invert", false), where);
  }
  if (type == "Metaspace") {
    const char32_t rep = f.has("replacement") ? char_field(f, "replacement") : U'\u2581';
    PrependScheme scheme = PrependScheme::Always;
    if (f.has("prepend_scheme")) {
      const std::string s = f.get<std::string>("prepend_scheme");
      if (s == "always")
        scheme = PrependScheme::Always;
      else if (s == "first")
        scheme = PrependScheme::First;
      else if (s == "never")
        scheme = PrependScheme::Never;
      else
        where.fail("field \"prepend_scheme\": unknown value \"", s, "\"");
    } else if (f.has("add_prefix_space")) {  // legacy field
      scheme = f.get<bool>("add_prefix_space") ? PrependScheme::Always : PrependScheme::Never;
    }
    return std::make_unique<MetaspacePre>(rep, scheme, f.get_or<bool>("split", true));
  }
  if (type == "Whitespace") return std::make_unique<WhitespacePre>();
  if (type == "WhitespaceSplit") return char_split(is_rust_whitespace, Behavior::Removed);
  if (type == "Punctuation")
    return char_split(is_punctuation, read_behavior(f, where, Behavior::Isolated));
  if (type == "Digits") {
    return char_split(is_rust_numeric, f.get_or<bool>("individual_digits", false)
                                           ? Behavior::Isolated
                                           : Behavior::Contiguous);
  }
  if (type == "BertPreTokenizer") return std::make_unique<BertPre>();
  if (type == "UnicodeScripts") return std::make_unique<UnicodeScripts>();
  if (type == "CharDelimiterSplit") {
    const char32_t d = char_field(f, "delimiter");
    return char_split([d](char32_t c) { return c == d; }, Behavior::Removed);
  }
  if (type == "Sequence") {
    if (depth >= kMaxSequenceDepth) where.fail("Sequence nested deeper than ", kMaxSequenceDepth);
    const Json& arr = array_field(f, "pretokenizers");
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (size_t i = 0; i < arr.size(); ++i)
      parts.push_back(
          make_pre_tokenizer(arr[i], at.child(cat(".pretokenizers[", i, "]")), depth + 1));
    return std::make_unique<SequencePre>(std::move(parts));
  }
  where.fail("unknown pre-tokenizer type \"", type, "\"");
}

}  // namespace lathe::tok
