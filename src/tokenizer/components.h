// The stages of the tokenizer.json pipeline, each built from its JSON description.
// Reference: the `tokenizers` crate (normalizers/, pre_tokenizers/, models/, processors/,
// decoders/); behaviour, not code, is reproduced here.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "io/json.h"

namespace lathe::tok {

// Nested Sequence components deeper than this are rejected.
inline constexpr int kMaxSequenceDepth = 16;

// Where a component sits in tokenizer.json, for error messages:
// "tokenizer.json: pre_tokenizer.pretokenizers[1] (Split)".
struct Where {
  std::string file;
  std::string path;
  std::string type;

  std::string str() const {
    return path.empty() ? file : cat(file, ": ", path, type.empty() ? "" : " (" + type + ")");
  }
  Where child(const std::string& sub) const { return Where{file, cat(path, sub), ""}; }
  Where typed(const std::string& t) const { return Where{file, path, t}; }
  template <class... Parts>
  [[noreturn]] void fail(Parts&&... parts) const {
    lathe::fail(str(), ": ", std::forward<Parts>(parts)...);
  }
};

// Reads the "type" field of a component object (throws if missing or not a string).
std::string component_type(const Json& j, const Where& where);
// Field `key` as an array (throws naming the field otherwise).
const Json& array_field(const JsonFields& f, const std::string& key);
// A {"String": s} or {"Regex": r} pattern object.
struct PatternSpec {
  bool is_regex = false;
  std::string text;
};
PatternSpec read_pattern(const JsonFields& f, const std::string& key);
// A single character field (e.g. Metaspace "replacement").
char32_t char_field(const JsonFields& f, const std::string& key);

// A piece of text flowing through pre-tokenization; `at_start` is true when it begins at
// offset 0 of the original input (Metaspace prepend_scheme "first" needs it).
struct Piece {
  std::string text;
  bool at_start = false;
};

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string s) const = 0;
  // Same, also clearing `at_start` when the input's first character is deleted, so the result
  // no longer begins at original offset 0 (upstream tracks alignments; Metaspace "first"
  // reads them). Only deleting normalizers override it.
  virtual std::string normalize_tracked(std::string s, bool& /*at_start*/) const {
    return normalize(std::move(s));
  }
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Splits each piece; empty pieces are dropped.
  virtual void split(std::vector<Piece>& pieces) const = 0;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual void tokenize(std::string_view word, std::vector<int32_t>& out) const = 0;
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  virtual const std::string* id_to_token(int32_t id) const = 0;
  virtual void for_each_token(const std::function<void(const std::string&, int32_t)>& f) const = 0;
};

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void process(std::vector<int32_t>& ids, bool add_special_tokens) const = 0;
};

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

std::unique_ptr<Normalizer> make_normalizer(const Json& j, const Where& where, int depth = 0);
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& j, const Where& where, int depth = 0);
std::unique_ptr<Model> make_model(const Json& j, const Where& where);
std::unique_ptr<PostProcessor> make_post_processor(const Json& j, const Where& where,
                                                   int depth = 0);
std::unique_ptr<Decoder> make_decoder(const Json& j, const Where& where, int depth = 0);

// Model constructors (one file each).
std::unique_ptr<Model> make_bpe(const JsonFields& f, const Where& where);
std::unique_ptr<Model> make_unigram(const JsonFields& f, const Where& where);
std::unique_ptr<Model> make_wordpiece(const JsonFields& f, const Where& where);
std::unique_ptr<Model> make_wordlevel(const JsonFields& f, const Where& where);

// SentencePiece precompiled charsmap normalizer from its base64 blob.
std::unique_ptr<Normalizer> make_precompiled(const std::string& base64, const Where& where);

// Template post-processor producing `prefix` + ids + `suffix` (the post-processor some
// transformers tokenizer classes build for themselves).
std::unique_ptr<PostProcessor> make_wrap_processor(std::vector<int32_t> prefix,
                                                   std::vector<int32_t> suffix);

// The Rust format "<0x{:02X}>" used by byte-fallback tokens.
std::string byte_token(unsigned char b);

}  // namespace lathe::tok
