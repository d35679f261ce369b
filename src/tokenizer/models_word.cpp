// WordPiece (tokenizers/src/models/wordpiece/mod.rs) and WordLevel (models/wordlevel/mod.rs).
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/components.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace lathe::tok {

namespace {

class WordModel : public Model {
 public:
  std::optional<int32_t> token_to_id(std::string_view t) const override { return vocab_.find(t); }
  const std::string* id_to_token(int32_t id) const override { return vocab_.token(id); }
  void for_each_token(const std::function<void(const std::string&, int32_t)>& f) const override {
    vocab_.for_each(f);
  }

 protected:
  int32_t unk(const char* model) const {
    if (!unk_id_) fail(model, ": unk_token \"", unk_token_, "\" is not in the vocabulary");
    return *unk_id_;
  }
  Vocab vocab_;
  std::string unk_token_;
  std::optional<int32_t> unk_id_;
};

class WordPiece : public WordModel {
 public:
  WordPiece(const JsonFields& f) {
    vocab_.read_object(f, "vocab");
    unk_token_ = f.get_or<std::string>("unk_token", "[UNK]");
    unk_id_ = vocab_.find(unk_token_);
    prefix_ = f.get_or<std::string>("continuing_subword_prefix", "##");
    const int64_t m = f.get_or<int64_t>("max_input_chars_per_word", 100);
    max_chars_ = m < 0 ? 0 : static_cast<size_t>(m);
  }

  void tokenize(std::string_view w, std::vector<int32_t>& out) const override {
    size_t chars = 0;
    for (unsigned char c : w) chars += (c & 0xC0) != 0x80;
    if (chars > max_chars_) {
      out.push_back(unk("WordPiece"));
      return;
    }
    const size_t first = out.size();
    std::string sub;
    size_t start = 0;
    while (start < w.size()) {
      size_t end = w.size();
      std::optional<int32_t> found;
      while (start < end) {
        sub.clear();
        if (start > 0) sub += prefix_;
        sub.append(w.substr(start, end - start));
        if ((found = vocab_.find(sub))) break;
        // Step back one character.
        --end;
        while (end > start && (static_cast<unsigned char>(w[end]) & 0xC0) == 0x80) --end;
      }
      if (!found) {
        out.resize(first);
        out.push_back(unk("WordPiece"));
        return;
      }
      out.push_back(*found);
      start = end;
    }
  }

 private:
  std::string prefix_;
  size_t max_chars_ = 100;
};

class WordLevel : public WordModel {
 public:
  WordLevel(const JsonFields& f) {
    vocab_.read_object(f, "vocab");
    unk_token_ = f.get_or<std::string>("unk_token", "<unk>");
    unk_id_ = vocab_.find(unk_token_);
  }
  void tokenize(std::string_view w, std::vector<int32_t>& out) const override {
    if (auto id = vocab_.find(w))
      out.push_back(*id);
    else
      out.push_back(unk("WordLevel"));
  }
};

}  // namespace

std::unique_ptr<Model> make_wordpiece(const JsonFields& f, const Where&) {
  return std::make_unique<WordPiece>(f);
}
std::unique_ptr<Model> make_wordlevel(const JsonFields& f, const Where&) {
  return std::make_unique<WordLevel>(f);
}

std::unique_ptr<Model> make_model(const Json& j, const Where& at) {
  // Old files omit "type"; upstream then guesses from the fields.
  std::string type;
  if (j.is_object() && !j.contains("type")) {
    if (j.contains("merges"))
      type = "BPE";
    else if (j.contains("vocab") && j["vocab"].is_array())
      type = "Unigram";
    else if (j.contains("continuing_subword_prefix"))
      type = "WordPiece";
    else
      type = "WordLevel";
  } else {
    type = component_type(j, at);
  }
  const Where where = at.typed(type);
  const JsonFields f(j, where.str());
  if (type == "BPE") return make_bpe(f, where);
  if (type == "Unigram") return make_unigram(f, where);
  if (type == "WordPiece") return make_wordpiece(f, where);
  if (type == "WordLevel") return make_wordlevel(f, where);
  where.fail("unknown model type \"", type, "\"");
}

}  // namespace lathe::tok
