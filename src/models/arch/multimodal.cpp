// The text model of multimodal checkpoints whose language model is one of lathe's causal LMs
// (Gemma3ForConditionalGeneration, Qwen2VLForConditionalGeneration, Qwen2_5_VL..., Mistral3...,
// LlavaForConditionalGeneration, LlavaOnevision..., InternVL..., Idefics3...): for text
// generation transformers
// runs that language model alone, so lathe loads it from the wrapper's text_config and the
// tensors under the language model's prefix, and leaves the vision tower and its projector
// unloaded. Two layouts are published: transformers 5's (model.language_model.*, lm_head.*)
// and the earlier one (language_model.model.*, language_model.lm_head.*; Qwen2-VL: model.*
// beside visual.*), which transformers 5 maps on load; lathe reads both. Idefics3 keeps its
// text model under model.text_model.
#include "core/error.h"
#include "models/arch/llama_family.h"
#include "models/config_fields.h"
#include "models/registry.h"

namespace lathe {
namespace {

using Renames = std::vector<std::pair<std::string, std::string>>;

// The layout of the checkpoint's tensors: which prefix holds the language model.
Renames text_layout(const Checkpoint& ckpt) {
  bool v5 = false, legacy = false, idefics = false;
  for (const std::string& name : ckpt.tensor_names()) {
    v5 = v5 || name.starts_with("model.language_model.");
    legacy = legacy || name.starts_with("language_model.");
    idefics = idefics || name.starts_with("model.text_model.");
  }
  if (v5) return {{"model.language_model.", "model."}, {"lm_head.", "lm_head."}};
  if (idefics) return {{"model.text_model.", "model."}, {"lm_head.", "lm_head."}};  // Idefics3
  if (legacy) return {{"language_model.model.", "model."}, {"language_model.lm_head.", "lm_head."}};
  // Qwen2-VL as first published: the text model at the top, the vision tower under visual.
  return {{"model.", "model."}, {"lm_head.", "lm_head."}};
}

// A config whose text fields sit at the top level (Qwen2-VL as first published) is its own
// text_config, less the vision's.
Json text_config(const JsonFields& top) {
  if (top.has("text_config")) {
    if (!top.at("text_config").is_object())
      fail(top.origin(), ": field \"text_config\" must be an object");
    return top.at("text_config");
  }
  Json t = top.json();
  t.erase("vision_config");
  return t;
}

// The causal LM of the text config's model_type: its loader, and the config completed as that
// architecture's config.json would be.
struct TextModel {
  const ArchitectureEntry* entry = nullptr;
  Json config;
};

TextModel resolve(const Checkpoint& ckpt, const char* default_text_type) {
  const JsonFields top(ckpt.config(), ckpt.config_path());
  TextModel t{.entry = nullptr, .config = text_config(top)};
  std::string type = t.config.value("model_type", std::string(default_text_type));
  // Qwen2-VL's and Qwen2.5-VL's language models are Qwen2 decoders whose multimodal rotary
  // (mrope_section) rotates text tokens as the default rotary does: their three position ids
  // are equal.
  if (type == "qwen2_vl_text" || type == "qwen2_5_vl_text" || type == "qwen2_vl" ||
      type == "qwen2_5_vl") {
    type = "qwen2";
    for (const char* field : {"rope_parameters", "rope_scaling"}) {
      if (!t.config.contains(field) || !t.config[field].is_object()) continue;
      Json& r = t.config[field];
      const std::string kind = r.value("rope_type", r.value("type", std::string("default")));
      if (kind != "mrope" && kind != "default") continue;  // the rope reader names it
      r.erase("type");
      r.erase("mrope_section");
      r["rope_type"] = "default";
    }
  }
  for (const ArchitectureEntry& e : architectures())
    if (type == e.model_type && std::string(e.name).ends_with("ForCausalLM")) t.entry = &e;
  if (!t.entry)
    fail(ckpt.config_path(), ": text_config: field \"model_type\" is \"", type, "\"; ",
         ckpt.architecture(), " in lathe runs a text model lathe implements as a causal LM");
  t.config["architectures"] = Json::array({t.entry->name});
  t.config["model_type"] = t.entry->model_type;
  // transformers ties the output head to the embeddings by the wrapper's own flag where it has
  // one.
  if (top.json().contains("tie_word_embeddings"))
    t.config["tie_word_embeddings"] = top.json()["tie_word_embeddings"];
  return t;
}

}  // namespace

std::unique_ptr<Model> load_multimodal_text(const Checkpoint& ckpt, const ModelOptions& opts,
                                            const char* default_text_type) {
  const TextModel t = resolve(ckpt, default_text_type);
  const Renames layout = text_layout(ckpt);
  const Checkpoint text = ckpt.text_model(
      t.config, ckpt.config().contains("text_config") ? "config.json: text_config" : "config.json",
      layout);
  std::unique_ptr<Model> model = t.entry->load(text, opts);
  model->set_runs(cat("the text model (", layout.front().first, ", as ", t.entry->name,
                      "); not loaded: ", text.left_out(), " tensors of the vision tower and ",
                      "projector"));
  return model;
}

// MllamaForConditionalGeneration on text alone: MllamaTextModel skips its cross-attention
// layers (cross_attention_layers) when there is no image, so its text model is a Llama decoder
// of the other layers, renumbered in order, with an embedding of vocab_size + 8 rows.
std::unique_ptr<Model> load_mllama_text(const Checkpoint& ckpt, const ModelOptions& opts) {
  const JsonFields top(ckpt.config(), ckpt.config_path());
  Json text = text_config(top);
  const JsonFields t(text, ckpt.config_path() + ": text_config");
  const int64_t total = t.get_or<int64_t>("num_hidden_layers", 40);
  check_sizes(t, {{"num_hidden_layers", total}});
  std::vector<bool> cross(static_cast<size_t>(total), false);
  if (t.has("cross_attention_layers")) {
    const Json& list = t.at("cross_attention_layers");
    if (!list.is_array()) fail(t.origin(), ": field \"cross_attention_layers\" must be a list");
    for (const Json& j : list) {
      if (!j.is_number_integer() || j.get<int64_t>() < 0 || j.get<int64_t>() >= total)
        fail(t.origin(), ": field \"cross_attention_layers\" holds ", j.dump(),
             ", not a layer of the ", total);
      cross[static_cast<size_t>(j.get<int64_t>())] = true;
    }
  }
  const Renames layout = text_layout(ckpt);
  const std::string from = layout.front().first;  // the text model's "model." prefix
  Renames renames;
  int64_t kept = 0;
  for (int64_t i = 0; i < total; ++i)
    if (!cross[static_cast<size_t>(i)])
      renames.push_back({cat(from, "layers.", i, "."), cat("model.layers.", kept++, ".")});
  renames.push_back({from + "embed_tokens.", "model.embed_tokens."});
  renames.push_back({from + "norm.", "model.norm."});
  renames.push_back(layout.back());  // lm_head
  text["num_hidden_layers"] = kept;
  text["architectures"] = Json::array({ckpt.architecture()});
  if (top.json().contains("tie_word_embeddings"))
    text["tie_word_embeddings"] = top.json()["tie_word_embeddings"];
  const Checkpoint view = ckpt.text_model(text, "config.json: text_config", renames);
  // MllamaTextConfig defaults.
  LlamaFamilyConfig c = read_llama_family_config(view, {.vocab_size = 128256,
                                                        .hidden_size = 4096,
                                                        .intermediate_size = 14336,
                                                        .num_layers = 40,
                                                        .heads = 32,
                                                        .kv_heads = 8,
                                                        .head_dim = {},
                                                        .max_position_embeddings = 131072,
                                                        .tie_word_embeddings = false,
                                                        .rope_theta = 500000.0,
                                                        .rms_norm_eps = 1e-5});
  c.embedding_rows = c.vocab_size + 8;
  std::unique_ptr<Model> model = build_llama_family(view, c, opts);
  model->set_runs(cat("the text model (", from, ", its ", total - kept,
                      " cross-attention layers skipped as on text alone); not loaded: ",
                      view.left_out(), " tensors of the vision model, projector and those layers"));
  return model;
}

}  // namespace lathe
