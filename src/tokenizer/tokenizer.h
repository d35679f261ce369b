// Tokenizer: reads a Hugging Face tokenizer.json (+ tokenizer_config.json) and encodes/decodes
// exactly as the `tokenizers` package does (see docs/tokenizer.md for the reference versions).
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lathe {

// The libraries the tokenizer is built on and their versions (Oniguruma, utf8proc, ICU).
std::vector<std::pair<std::string, std::string>> tokenizer_library_versions();

namespace tok {
struct Pipeline;  // normalizer, pre-tokenizer, model, post-processor, decoder, added tokens
}

// Special tokens named by tokenizer_config.json (empty when absent or null).
struct SpecialTokens {
  std::string bos, eos, unk, pad;
  std::vector<std::string> additional;
};

class Tokenizer {
 public:
  // Reads DIR/tokenizer.json and, when present, DIR/tokenizer_config.json.
  // Throws lathe::Error naming the file, the component and the field on malformed input.
  static Tokenizer load(const std::filesystem::path& dir);
  // Same, from a tokenizer.json path and an optional tokenizer_config.json path.
  static Tokenizer load_files(const std::filesystem::path& tokenizer_json,
                              const std::optional<std::filesystem::path>& config_json);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // `text` must be valid UTF-8 (throws lathe::Error otherwise).
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  // encode() for a model's prompt: a non-empty text that yields no ids throws lathe::Error
  // naming the tokenizer.json and the stage (normalizer, pre-tokenizer, model) that dropped it.
  std::vector<int32_t> encode_prompt(std::string_view text, bool add_special_tokens) const;
  // Unknown ids are skipped, as `tokenizers` does.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  // Number of distinct tokens, model vocabulary plus added tokens
  // (`tokenizers`' get_vocab_size(with_added_tokens=True)).
  int64_t vocab_size() const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::string id_to_token(int32_t id) const;  // empty when unknown
  bool is_special_id(int32_t id) const;

  const SpecialTokens& special_tokens() const { return special_; }
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;

 private:
  Tokenizer();
  std::unique_ptr<tok::Pipeline> p_;
  SpecialTokens special_;
};

// Incremental detokenizer: feed ids one at a time and get the newly final text. Never splits a
// UTF-8 character; the concatenation of all pieces and finish() equals decode(all ids).
class StreamDecoder {
 public:
  StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens);
  std::string feed(int32_t id);
  std::string finish();  // whatever is still held back (e.g. an incomplete byte sequence)

 private:
  const Tokenizer* tok_;
  bool skip_special_;
  std::vector<int32_t> ids_;
  size_t prefix_start_ = 0;  // window start: decoding context for the next piece
  size_t read_start_ = 0;    // ids before this are already emitted
};

// JSON lines for `lathe tokenize` / `lathe detokenize`: one answer line per input line, in
// order; blank lines are skipped. Throws lathe::Error naming the line on malformed input.
void run_tokenize_jsonl(const Tokenizer& tokenizer, std::istream& in, std::ostream& out);
void run_detokenize_jsonl(const Tokenizer& tokenizer, std::istream& in, std::ostream& out);

}  // namespace lathe
