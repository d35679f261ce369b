#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace lathe::tok {

namespace {

// Last character of s[0, end) (end > 0).
char32_t last_cp(std::string_view s, size_t end) {
  size_t k = end - 1;
  while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
  return next_cp(s, k);
}

}  // namespace

int32_t AddedMatcher::child(int32_t n, unsigned char c) const {
  const auto& k = nodes_[n].kids;
  auto it = std::lower_bound(k.begin(), k.end(), std::make_pair(c, INT32_MIN));
  return it != k.end() && it->first == c ? it->second : -1;
}

void AddedMatcher::build(std::vector<std::string> patterns, std::vector<const AddedToken*> tokens) {
  tokens_ = std::move(tokens);
  for (size_t t = 0; t < patterns.size(); ++t) {
    const std::string& p = patterns[t];
    if (p.empty()) continue;  // an empty pattern never matches
    first_[static_cast<unsigned char>(p[0])] = true;
    int32_t n = 0;
    for (unsigned char c : p) {
      int32_t nx = child(n, c);
      if (nx < 0) {
        nx = static_cast<int32_t>(nodes_.size());
        nodes_.push_back(Node{});
        auto& k = nodes_[n].kids;
        k.insert(std::lower_bound(k.begin(), k.end(), std::make_pair(c, INT32_MIN)), {c, nx});
      }
      n = nx;
    }
    if (nodes_[n].token < 0) nodes_[n].token = static_cast<int32_t>(t);  // first pattern wins
  }
}

std::vector<Segment> AddedMatcher::split(std::string_view s) const {
  std::vector<Segment> out;
  if (s.empty() || tokens_.empty()) {
    out.push_back({0, s.size(), -1});
    return out;
  }
  size_t done = 0;  // start of the text not yet emitted
  size_t pos = 0;   // where the leftmost-longest search resumes
  while (pos < s.size()) {
    // Leftmost start with any match, longest match there.
    size_t mb = 0, me = 0;
    int32_t mt = -1;
    for (size_t i = pos; i < s.size() && mt < 0; ++i) {
      if (!first_[static_cast<unsigned char>(s[i])]) continue;
      int32_t n = 0;
      for (size_t k = i; k < s.size(); ++k) {
        n = child(n, static_cast<unsigned char>(s[k]));
        if (n < 0) break;
        if (nodes_[n].token >= 0) mb = i, me = k + 1, mt = nodes_[n].token;
      }
    }
    if (mt < 0) break;
    pos = me;
    const AddedToken& t = *tokens_[mt];
    size_t b = mb, e = me;
    if (t.single_word) {
      const bool start_ok = b == 0 || !is_word_char(last_cp(s, b));
      size_t k = e;
      const bool stop_ok = e == s.size() || !is_word_char(next_cp(s, k));
      if (!start_ok || !stop_ok) continue;
    }
    if (t.lstrip) {
      size_t nb = b;
      while (nb > 0) {
        size_t k = nb - 1;
        while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
        size_t j = k;
        if (!is_rust_whitespace(next_cp(s, j))) break;
        nb = k;
      }
      b = std::max(nb, done);
    }
    if (t.rstrip) {
      while (e < s.size()) {
        size_t j = e;
        if (!is_rust_whitespace(next_cp(s, j))) break;
        e = j;
      }
    }
    if (done < b) out.push_back({done, b, -1});
    out.push_back({b, e, t.id});
    done = e;
    // Upstream resumes matching after the raw match, even when rstrip consumed more; a match
    // inside the stripped spaces cannot exist (tokens are not whitespace-only in practice).
    pos = std::max(pos, e);
  }
  if (done != s.size()) out.push_back({done, s.size(), -1});
  return out;
}

}  // namespace lathe::tok
