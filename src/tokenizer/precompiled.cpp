// SentencePiece precompiled charsmap (the `Precompiled` normalizer): a little-endian u32 trie
// size in bytes, a darts-clone double-array trie of that size, then NUL-terminated
// replacement strings. Lookup follows the spm_precompiled crate that `tokenizers` uses.
#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/components.h"
#include "tokenizer/unicode.h"

namespace lathe::tok {

namespace {

std::string base64_decode(const std::string& in, const Where& where) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  out.reserve(in.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '=') break;
    const int v = val(c);
    if (v < 0) where.fail("field \"precompiled_charsmap\": invalid base64 character at ", i);
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  return out;
}

class Precompiled : public Normalizer {
 public:
  Precompiled(const std::string& blob, const Where& where) {
    if (blob.size() < 4)
      where.fail("field \"precompiled_charsmap\": blob of ", blob.size(), " bytes is too short");
    const auto byte = [&](size_t k) {
      return static_cast<uint32_t>(static_cast<unsigned char>(blob[k]));
    };
    const uint32_t trie_bytes = byte(0) | byte(1) << 8 | byte(2) << 16 | byte(3) << 24;
    if (trie_bytes > blob.size() - 4 || trie_bytes % 4 != 0 || trie_bytes == 0)
      where.fail("field \"precompiled_charsmap\": trie size ", trie_bytes, " does not fit the ",
                 blob.size(), "-byte blob");
    array_.resize(trie_bytes / 4);
    for (size_t i = 0; i < array_.size(); ++i) {
      const size_t k = 4 + 4 * i;
      array_[i] = byte(k) | byte(k + 1) << 8 | byte(k + 2) << 16 | byte(k + 3) << 24;
    }
    normalized_ = blob.substr(4 + trie_bytes);
    if (find_invalid_utf8(normalized_) != std::string::npos)
      where.fail("field \"precompiled_charsmap\": replacement strings are not valid UTF-8");
  }

  std::string normalize(std::string s) const override {
    std::string out;
    out.reserve(s.size());
    size_t at = 0;
    for (size_t glen : grapheme_lengths(s)) {
      const std::string_view g(s.data() + at, glen);
      at += glen;
      if (glen < 6) {
        if (const auto r = transform(g)) {
          out += *r;
          continue;
        }
      }
      size_t i = 0;
      while (i < g.size()) {
        const size_t b = i;
        next_cp(g, i);
        const std::string_view ch = g.substr(b, i - b);
        if (const auto r = transform(ch))
          out += *r;
        else
          out += ch;
      }
    }
    return out;
  }

 private:
  // First (shortest) prefix match, as spm_precompiled's transform does.
  std::optional<std::string_view> transform(std::string_view chunk) const {
    size_t pos = 0;
    uint32_t unit = array_[0];
    pos ^= offset(unit);
    for (unsigned char c : chunk) {
      if (c == 0) break;
      pos ^= c;
      if (pos >= array_.size()) return std::nullopt;
      unit = array_[pos];
      if (label(unit) != c) return std::nullopt;
      pos ^= offset(unit);
      if (pos >= array_.size()) return std::nullopt;
      if ((unit >> 8) & 1) {
        const size_t index = array_[pos] & 0x7FFFFFFFu;
        if (index >= normalized_.size()) return std::nullopt;
        size_t end = normalized_.find('\0', index);
        if (end == std::string::npos) end = normalized_.size();
        return std::string_view(normalized_).substr(index, end - index);
      }
    }
    return std::nullopt;
  }
  static uint32_t label(uint32_t u) { return u & (0x80000000u | 0xFFu); }
  static size_t offset(uint32_t u) {
    return static_cast<size_t>(u >> 10) << ((u & (1u << 9)) >> 6);
  }

  std::vector<uint32_t> array_;
  std::string normalized_;
};

}  // namespace

std::unique_ptr<Normalizer> make_precompiled(const std::string& base64, const Where& where) {
  return std::make_unique<Precompiled>(base64_decode(base64, where), where);
}

}  // namespace lathe::tok
