// Loading tokenizer.json / tokenizer_config.json and running the pipeline
// (tokenizers/src/tokenizer/{mod,serialization}.rs; transformers 5.x's
// tokenization_utils_base.py and tokenization_utils_tokenizers.py for tokenizer_config.json).
#include "tokenizer/tokenizer.h"

#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "io/json.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/components.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace lathe {

namespace tok {

struct Pipeline {
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<Model> model;
  std::unique_ptr<PostProcessor> post_processor;
  std::unique_ptr<Decoder> decoder;
  std::vector<AddedToken> added;  // file order
  std::unordered_map<int32_t, const AddedToken*> added_by_id;
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> added_by_content;
  std::unordered_set<std::string> special_contents;
  AddedMatcher raw_matcher, normalized_matcher;
  int64_t vocab_size = 0;
  std::string file;  // tokenizer.json, for errors
  std::string normalizer_type, pre_tokenizer_type, model_type;
};

}  // namespace tok

namespace {

using tok::Where;

std::unique_ptr<tok::Pipeline> load_pipeline(const Json& j, const std::string& file) {
  auto p = std::make_unique<tok::Pipeline>();
  const Where root{file, "", ""};
  if (!j.is_object()) root.fail("expected a JSON object at the top level");
  auto present = [&](const char* key) { return j.contains(key) && !j[key].is_null(); };
  if (!present("model")) root.fail("missing field \"model\"");
  p->model = tok::make_model(j["model"], Where{file, "model", ""});
  p->file = file;
  auto type_of = [&](const char* key) {
    const Json& c = j[key];
    return c.contains("type") && c["type"].is_string() ? c["type"].get<std::string>() : "";
  };
  p->model_type = type_of("model");
  if (present("normalizer")) {
    p->normalizer = tok::make_normalizer(j["normalizer"], Where{file, "normalizer", ""});
    p->normalizer_type = type_of("normalizer");
  }
  if (present("pre_tokenizer")) {
    p->pre_tokenizer =
        tok::make_pre_tokenizer(j["pre_tokenizer"], Where{file, "pre_tokenizer", ""});
    p->pre_tokenizer_type = type_of("pre_tokenizer");
  }
  if (present("post_processor"))
    p->post_processor =
        tok::make_post_processor(j["post_processor"], Where{file, "post_processor", ""});
  if (present("decoder")) p->decoder = tok::make_decoder(j["decoder"], Where{file, "decoder", ""});

  if (present("added_tokens")) {
    const Json& arr = j["added_tokens"];
    if (!arr.is_array()) root.fail("field \"added_tokens\" must be an array");
    p->added.reserve(arr.size());
    for (size_t i = 0; i < arr.size(); ++i) {
      const std::string origin = cat(file, ": added_tokens[", i, "]");
      const JsonFields f(arr[i], origin);
      tok::AddedToken t;
      t.content = f.get<std::string>("content");
      t.id = tok::read_id(f.at("id"), origin, "field \"id\"");
      t.single_word = f.get_or<bool>("single_word", false);
      t.lstrip = f.get_or<bool>("lstrip", false);
      t.rstrip = f.get_or<bool>("rstrip", false);
      t.special = f.get_or<bool>("special", false);
      t.normalized = f.get_or<bool>("normalized", !t.special);
      if (t.content.empty()) continue;  // upstream ignores empty tokens
      // A token the model already knows keeps the model's id (upstream warns otherwise).
      if (auto mid = p->model->token_to_id(t.content)) t.id = *mid;
      p->added.push_back(std::move(t));
    }
  }
  // Specials first, then the others, as upstream builds its matchers.
  std::vector<std::string> raw_pats, norm_pats;
  std::vector<const tok::AddedToken*> raw_toks, norm_toks;
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& t : p->added) {
      if (t.special != (pass == 0)) continue;
      if (t.normalized) {
        norm_pats.push_back(p->normalizer ? p->normalizer->normalize(t.content) : t.content);
        norm_toks.push_back(&t);
      } else {
        raw_pats.push_back(t.content);
        raw_toks.push_back(&t);
      }
    }
  }
  p->raw_matcher.build(std::move(raw_pats), std::move(raw_toks));
  p->normalized_matcher.build(std::move(norm_pats), std::move(norm_toks));
  for (const auto& t : p->added) {
    p->added_by_id[t.id] = &t;
    p->added_by_content[t.content] = t.id;
    if (t.special) p->special_contents.insert(t.content);
  }
  int64_t n = 0;
  p->model->for_each_token([&](const std::string&, int32_t) { ++n; });
  for (const auto& [content, id] : p->added_by_content)
    if (!p->model->token_to_id(content)) ++n;
  p->vocab_size = n;
  return p;
}

// A special token entry of tokenizer_config.json: a string or {"content": ...}.
std::string config_token(const Json& cfg, const char* key, const std::string& file) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  fail(file, ": field \"", key, "\" must be a string or {\"content\": ...}, found ", it->dump());
}

// How transformers 5.x (5.24) builds the post-processor when tokenizer.json exists
// (docs/tokenizer.md): PreTrainedTokenizerBase._from_pretrained drops tokenizer_config's
// add_bos_token / add_eos_token, so tokenizer.json's post_processor decides (none when null),
// except for the classes whose __init__ rebuilds it regardless.
enum class ConfigPost { FromFile, BosOnly, Nothing };

ConfigPost config_post_processor(const std::string& tokenizer_class) {
  // CodeLlamaTokenizer passes its own add_bos_token=True default to update_post_processor.
  if (tokenizer_class == "CodeLlamaTokenizer" || tokenizer_class == "CodeLlamaTokenizerFast")
    return ConfigPost::BosOnly;
  // GPTNeoXTokenizer calls update_post_processor() with add_bos / add_eos false.
  if (tokenizer_class == "GPTNeoXTokenizer" || tokenizer_class == "GPTNeoXTokenizerFast")
    return ConfigPost::Nothing;
  return ConfigPost::FromFile;
}

}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::load(const std::filesystem::path& dir) {
  const auto cfg = dir / "tokenizer_config.json";
  return load_files(dir / "tokenizer.json",
                    std::filesystem::exists(cfg) ? std::optional(cfg) : std::nullopt);
}

Tokenizer Tokenizer::load_files(const std::filesystem::path& tokenizer_json,
                                const std::optional<std::filesystem::path>& config_json) {
  Tokenizer t;
  t.p_ = load_pipeline(read_json_file(tokenizer_json), tokenizer_json.string());
  if (!config_json) return t;
  const std::string file = config_json->string();
  const Json cfg = read_json_file(*config_json);
  if (!cfg.is_object()) fail(file, ": expected a JSON object at the top level");
  t.special_.bos = config_token(cfg, "bos_token", file);
  t.special_.eos = config_token(cfg, "eos_token", file);
  t.special_.unk = config_token(cfg, "unk_token", file);
  t.special_.pad = config_token(cfg, "pad_token", file);
  if (auto it = cfg.find("additional_special_tokens"); it != cfg.end() && it->is_array())
    for (const auto& v : *it)
      if (v.is_string()) t.special_.additional.push_back(v.get<std::string>());

  const JsonFields f(cfg, file);
  const std::string cls = f.has("tokenizer_class") && f.at("tokenizer_class").is_string()
                              ? f.get<std::string>("tokenizer_class")
                              : "";
  switch (config_post_processor(cls)) {
    case ConfigPost::FromFile:
      break;
    case ConfigPost::BosOnly: {
      const std::string bos = t.special_.bos.empty() ? "<s>" : t.special_.bos;  // class default
      auto id = t.token_to_id(bos);
      if (!id)
        fail(file, ": tokenizer_class ", cls, " adds the bos token \"", bos,
             "\", which is not in the vocabulary");
      t.p_->post_processor = tok::make_wrap_processor({*id}, {});
      break;
    }
    case ConfigPost::Nothing:
      t.p_->post_processor = tok::make_wrap_processor({}, {});
      break;
  }
  return t;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  if (const size_t bad = tok::find_invalid_utf8(text); bad != std::string_view::npos)
    fail("tokenizer: input text is not valid UTF-8 at byte ", bad);
  const tok::Pipeline& p = *p_;
  std::vector<int32_t> ids;
  std::vector<tok::Piece> pieces;
  for (const auto& raw : p.raw_matcher.split(text)) {
    if (raw.id >= 0) {
      ids.push_back(raw.id);
      continue;
    }
    if (raw.e == raw.b) continue;
    std::string norm(text.substr(raw.b, raw.e - raw.b));
    bool at_start = raw.b == 0;
    if (p.normalizer) norm = p.normalizer->normalize_tracked(std::move(norm), at_start);
    for (const auto& seg : p.normalized_matcher.split(norm)) {
      if (seg.id >= 0) {
        ids.push_back(seg.id);
        continue;
      }
      if (seg.e == seg.b) continue;
      pieces.clear();
      pieces.push_back({norm.substr(seg.b, seg.e - seg.b), at_start && seg.b == 0});
      if (p.pre_tokenizer) p.pre_tokenizer->split(pieces);
      for (const auto& piece : pieces) p.model->tokenize(piece.text, ids);
    }
  }
  if (p.post_processor) p.post_processor->process(ids, add_special_tokens);
  return ids;
}

std::vector<int32_t> Tokenizer::encode_prompt(std::string_view text,
                                              bool add_special_tokens) const {
  std::vector<int32_t> ids = encode(text, add_special_tokens);
  if (!ids.empty() || text.empty()) return ids;
  // Which stage dropped everything: rerun the pipeline counting what each one left.
  const tok::Pipeline& p = *p_;
  size_t normalized_bytes = 0, pieces = 0;
  std::vector<tok::Piece> split;
  for (const auto& raw : p.raw_matcher.split(text)) {
    if (raw.e == raw.b) continue;
    std::string norm(text.substr(raw.b, raw.e - raw.b));
    bool at_start = raw.b == 0;
    if (p.normalizer) norm = p.normalizer->normalize_tracked(std::move(norm), at_start);
    normalized_bytes += norm.size();
    for (const auto& seg : p.normalized_matcher.split(norm)) {
      if (seg.e == seg.b) continue;
      split.clear();
      split.push_back({norm.substr(seg.b, seg.e - seg.b), at_start && seg.b == 0});
      if (p.pre_tokenizer) p.pre_tokenizer->split(split);
      pieces += split.size();
    }
  }
  auto named = [](const char* stage, const std::string& type) {
    return type.empty() ? std::string(stage) : cat(stage, " (", type, ")");
  };
  const std::string head =
      cat(p.file, ": the tokenizer turned the ", text.size(), "-byte text into no tokens: ");
  if (normalized_bytes == 0)
    fail(head, named("the normalizer", p.normalizer_type), " removed all of it");
  if (pieces == 0)
    fail(head, named("the pre-tokenizer", p.pre_tokenizer_type), " left no pieces of its ",
         normalized_bytes, " normalized bytes");
  fail(head, named("the model", p.model_type), " produced no ids for its ", pieces,
       " pieces (no vocabulary entry matched and no unk_token)");
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const tok::Pipeline& p = *p_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    const std::string* s = nullptr;
    if (auto it = p.added_by_id.find(id); it != p.added_by_id.end())
      s = &it->second->content;
    else
      s = p.model->id_to_token(id);
    if (!s) continue;
    if (skip_special_tokens && p.special_contents.count(*s)) continue;
    tokens.push_back(*s);
  }
  std::string out;
  if (p.decoder) {
    p.decoder->decode_chain(tokens);
    for (const auto& t : tokens) out += t;
  } else {
    for (size_t k = 0; k < tokens.size(); ++k) {
      if (k) out += ' ';
      out += tokens[k];
    }
  }
  return out;
}

int64_t Tokenizer::vocab_size() const {
  return p_->vocab_size;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto it = p_->added_by_content.find(token); it != p_->added_by_content.end())
    return it->second;
  return p_->model->token_to_id(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  if (auto it = p_->added_by_id.find(id); it != p_->added_by_id.end()) return it->second->content;
  const std::string* s = p_->model->id_to_token(id);
  return s ? *s : std::string();
}

bool Tokenizer::is_special_id(int32_t id) const {
  auto it = p_->added_by_id.find(id);
  return it != p_->added_by_id.end() && it->second->special;
}

std::optional<int32_t> Tokenizer::bos_id() const {
  return special_.bos.empty() ? std::nullopt : token_to_id(special_.bos);
}
std::optional<int32_t> Tokenizer::eos_id() const {
  return special_.eos.empty() ? std::nullopt : token_to_id(special_.eos);
}

}  // namespace lathe
