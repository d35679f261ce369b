// Post-processors (ids only; offsets and type ids are not produced):
// tokenizers/src/processors/{template,bert,roberta,byte_level,sequence}.rs.
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/components.h"
#include "tokenizer/vocab.h"

namespace lathe::tok {

namespace {

// Adds fixed ids around the sequence when special tokens are requested.
class Wrap : public PostProcessor {
 public:
  Wrap(std::vector<int32_t> prefix, std::vector<int32_t> suffix)
      : prefix_(std::move(prefix)), suffix_(std::move(suffix)) {}
  void process(std::vector<int32_t>& ids, bool add_special_tokens) const override {
    if (!add_special_tokens) return;
    ids.insert(ids.begin(), prefix_.begin(), prefix_.end());
    ids.insert(ids.end(), suffix_.begin(), suffix_.end());
  }

 private:
  std::vector<int32_t> prefix_, suffix_;
};

class Identity : public PostProcessor {
 public:
  void process(std::vector<int32_t>&, bool) const override {}
};

class SequencePost : public PostProcessor {
 public:
  explicit SequencePost(std::vector<std::unique_ptr<PostProcessor>> p) : parts_(std::move(p)) {}
  void process(std::vector<int32_t>& ids, bool add) const override {
    for (const auto& p : parts_) p->process(ids, add);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

// A ["token", id] pair (Bert/Roberta "sep" and "cls").
int32_t pair_id(const JsonFields& f, const std::string& key) {
  const Json& v = f.at(key);
  if (!v.is_array() || v.size() != 2 || !v[0].is_string())
    fail(f.origin(), ": field \"", key, "\" must be [token, id], found ", v.dump());
  return read_id(v[1], f.origin(), cat("field \"", key, "\"[1]"));
}

std::unique_ptr<PostProcessor> make_template(const JsonFields& f, const Where& where) {
  const Json& specials = f.at("special_tokens");
  if (!specials.is_object()) where.fail("field \"special_tokens\" must be an object");
  const Json& single = array_field(f, "single");
  std::vector<int32_t> prefix, suffix;
  bool seen_a = false;
  for (size_t i = 0; i < single.size(); ++i) {
    const Json& piece = single[i];
    const std::string at = cat("field \"single\"[", i, "]");
    if (!piece.is_object() || piece.size() != 1)
      where.fail(at, " must be {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    if (piece.contains("Sequence")) {
      seen_a = true;
      continue;
    }
    if (!piece.contains("SpecialToken") || !piece["SpecialToken"].is_object() ||
        !piece["SpecialToken"].contains("id") || !piece["SpecialToken"]["id"].is_string())
      where.fail(at, " must be {\"SpecialToken\": {\"id\": ...}} or {\"Sequence\": ...}");
    const std::string name = piece["SpecialToken"]["id"].get<std::string>();
    auto it = specials.find(name);
    if (it == specials.end())
      where.fail(at, ": special token \"", name, "\" is missing from \"special_tokens\"");
    const JsonFields sf(*it, cat(where.str(), ": field \"special_tokens\".\"", name, "\""));
    const Json& ids = array_field(sf, "ids");
    auto& dst = seen_a ? suffix : prefix;
    for (size_t k = 0; k < ids.size(); ++k)
      dst.push_back(read_id(ids[k], sf.origin(), cat("field \"ids\"[", k, "]")));
  }
  return std::make_unique<Wrap>(std::move(prefix), std::move(suffix));
}

}  // namespace

std::unique_ptr<PostProcessor> make_wrap_processor(std::vector<int32_t> prefix,
                                                   std::vector<int32_t> suffix) {
  return std::make_unique<Wrap>(std::move(prefix), std::move(suffix));
}

std::unique_ptr<PostProcessor> make_post_processor(const Json& j, const Where& at, int depth) {
  const std::string type = component_type(j, at);
  const Where where = at.typed(type);
  const JsonFields f(j, where.str());
  if (type == "TemplateProcessing") return make_template(f, where);
  if (type == "ByteLevel") return std::make_unique<Identity>();
  if (type == "BertProcessing" || type == "RobertaProcessing")
    return std::make_unique<Wrap>(std::vector<int32_t>{pair_id(f, "cls")},
                                  std::vector<int32_t>{pair_id(f, "sep")});
  if (type == "Sequence") {
    if (depth >= kMaxSequenceDepth) where.fail("Sequence nested deeper than ", kMaxSequenceDepth);
    const Json& arr = array_field(f, "processors");
    std::vector<std::unique_ptr<PostProcessor>> parts;
    for (size_t i = 0; i < arr.size(); ++i)
      parts.push_back(
          make_post_processor(arr[i], at.child(cat(".processors[", i, "]")), depth + 1));
    return std::make_unique<SequencePost>(std::move(parts));
  }
  where.fail("unknown post-processor type \"", type, "\"");
}

}  // namespace lathe::tok
