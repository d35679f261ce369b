// Streaming detokenization: decode a sliding window of ids and emit only the text that
// extends what the window's prefix already produced (the `tokenizers` DecodeStream idea). The
// window keeps the previous emitted ids as context, so decoders that look at neighbours
// (Metaspace's first-token rule, Strip, ByteFallback runs) see the same context as a full
// decode.
#include <string>

#include "tokenizer/tokenizer.h"

namespace lathe {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// A ByteFallback run decodes to text only when the whole run is valid UTF-8 (otherwise one
// U+FFFD per byte), so nothing is final while the newest token is a <0xXX> byte token.
bool is_byte_token(const std::string& t) {
  return t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>';
}

bool ends_with(const std::string& s, std::string_view t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

}  // namespace

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tok_(&tokenizer), skip_special_(skip_special_tokens) {}

std::string StreamDecoder::feed(int32_t id) {
  ids_.push_back(id);
  if (is_byte_token(tok_->id_to_token(id))) return {};
  const std::span<const int32_t> all(ids_);
  const std::string prefix =
      tok_->decode(all.subspan(prefix_start_, read_start_ - prefix_start_), skip_special_);
  const std::string full = tok_->decode(all.subspan(prefix_start_), skip_special_);
  // Hold back while the newest bytes do not yet form a complete character, or while the
  // window's text does not extend its prefix (a decoder rewrote earlier output).
  if (full.size() <= prefix.size() || ends_with(full, kReplacement) ||
      full.compare(0, prefix.size(), prefix) != 0)
    return {};
  std::string piece = full.substr(prefix.size());
  prefix_start_ = read_start_;
  read_start_ = ids_.size();
  return piece;
}

std::string StreamDecoder::finish() {
  const std::span<const int32_t> all(ids_);
  const std::string prefix =
      tok_->decode(all.subspan(prefix_start_, read_start_ - prefix_start_), skip_special_);
  const std::string full = tok_->decode(all.subspan(prefix_start_), skip_special_);
  read_start_ = prefix_start_ = ids_.size();
  if (full.size() <= prefix.size() || full.compare(0, prefix.size(), prefix) != 0) return {};
  return full.substr(prefix.size());
}

}  // namespace lathe
