// The skeleton every decoder-only model shares, once: token embedding, the layer loop,
// the rows that want logits, final norm, output head. A model file derives from Decoder,
// loads its weights and supplies its own layer (and, where it differs, embedding, norm and
// head), readable beside its modeling_<arch>.py.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "models/blocks.h"
#include "models/config_fields.h"
#include "models/engine.h"
#include "models/moe.h"
#include "models/rope.h"

namespace lathe {

// What a layer reads besides the residual stream.
struct LayerInputs {
  const StepInputs& step;
  std::span<const graph::Value> rope_tables;  // one per entry of Decoder::ropes_

  // What layer i's attention reads: the tables of ropes_[rope], the cache layer i.
  blocks::AttentionInputs attention(int64_t i, size_t rope = 0) const {
    return {.rope_tables = rope_tables[rope], .layer = i};
  }
};

// The Hugging Face names of the weights the decoder's loading skeleton fetches; the defaults are
// LlamaForCausalLM's.
struct DecoderNames {
  std::string embed = "model.embed_tokens.weight";
  std::string layers = "model.layers.";    // layer i's weights are under layers + i + "."
  std::string final_norm = "model.norm.";  // its "weight" (and "bias")
  std::string lm_head = "lm_head.weight";
  int64_t embed_rows = 0;  // the embedding's rows where they are not vocab_size
};

// What the skeleton reads of a model's config.
struct DecoderSizes {
  std::string architecture;
  int64_t vocab_size = 0, hidden_size = 0, num_layers = 0;
  bool tie_word_embeddings = false;
};

// The fields every decoder's config has, for a model file's config struct to extend (those
// that are LlamaConfig's use LlamaFamilyConfig).
struct DecoderConfig {
  std::string architecture;
  int64_t vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_layers = 0;
  int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  AttentionSpec attention;
  RopeConfig rope;
};

// The prefix of layer i's named intermediates: "layer.<i>.".
std::string layer_prefix(int64_t i);

// A decoder layer as most architectures have it (transformers' <Arch>DecoderLayer): self-attention,
// then an MLP, each a residual branch behind the norms the layer has before and after it:
//   x + attn_post_norm(attn(attn_norm(x))), then x + mlp_post_norm(mlp(mlp_norm(x)))
// (Llama-style blocks have the pre-norms, Olmo2 the post-norms, Gemma2 both); or, `parallel`,
// x + (attn(attn_norm(x)) + mlp(mlp_norm(x))), the MLP reading attn_norm(x) where the layer has
// no mlp_norm (Phi, GPTJ; GPTNeoX use_parallel_residual has both norms). The MLP is a mixture
// of experts on the layers that have `moe`.
struct DecoderLayer {
  AttentionSpec spec;
  std::optional<Norm> attn_norm = {}, attn_post_norm = {}, mlp_norm = {},
                      mlp_post_norm = {};  // unset: none
  AttentionWeights attn = {};
  Tensor sinks = {};  // GptOss: a learned logit per head in the softmax (undefined: none)
  GatedMlpWeights mlp = {};
  graph::Activation act = graph::Activation::Silu;
  std::optional<MoeWeights> moe = {};  // instead of mlp, run by moe_spec (blocks::moe)
  MoeSpec moe_spec = {};
  size_t rope = 0;  // which of the decoder's rotary tables its attention reads
  bool parallel = false;

  // The Hugging Face names of the norms the layer has, under its prefix ("" where it has none).
  struct NormNames {
    std::string attn_norm = {}, attn_post_norm = {}, mlp_norm = {}, mlp_post_norm = {};
  };
  // Loads those norms of kind `norm` ([dim] weights, prefix + name + "weight").
  void load_norms(Weights& w, const std::string& prefix, const Norm& norm, int64_t dim,
                  const NormNames& names);

  // Names its intermediates under `prefix` ("layer.3."): attn_norm, post_attn_norm, mlp_norm,
  // post_mlp_norm beside those of blocks::self_attention and blocks::gated_mlp.
  graph::Value forward(graph::Builder& g, graph::Value x, const blocks::AttentionInputs& ai,
                       const std::string& prefix) const;
};

class Decoder : public GraphModel {
 public:
  // embed -> layer.0 .. layer.N-1 (each named "layer.i.out") -> rows -> final_norm -> head.
  graph::Value build(graph::Builder& g, const StepInputs& in) const final;

 protected:
  // [n, hidden]: rows of embed_ for the tokens, times embed_scale_ when it is not 1.
  virtual graph::Value embed(graph::Builder& g, const StepInputs& in) const;
  virtual graph::Value layer(graph::Builder& g, int64_t i, graph::Value x,
                             const LayerInputs& in) const = 0;
  // final_norm_ by default.
  virtual graph::Value final_norm(graph::Builder& g, graph::Value x) const;
  // [r, vocab]: x . lm_head_^T (+ lm_head_bias_) by default.
  virtual graph::Value head(graph::Builder& g, graph::Value x) const;

  // Called for each layer, in order, with the prefix of its weights ("model.layers.3.").
  using LoadLayer = std::function<void(Weights& w, int64_t i, const std::string& prefix)>;
  // The loading skeleton every decoder shares, in this order: the embedding, each layer through
  // load_layer, the final norm (of final_norm_'s kind, set before), the output head (tied to the
  // embedding, or its own); then `rest` for what the model has besides (an lm_head bias,
  // buffers to ignore), the check that every tensor was used, and info_.
  template <class Config>
  void load(const Checkpoint& ckpt, const ModelOptions& opts, const Config& c,
            const LoadLayer& load_layer, const DecoderNames& names = {},
            const std::function<void(Weights&)>& rest = {}) {
    Weights w(ckpt, opts.dtype, !opts.dequantize_fp8);
    load(w,
         {.architecture = c.architecture,
          .vocab_size = c.vocab_size,
          .hidden_size = c.hidden_size,
          .num_layers = c.num_layers,
          .tie_word_embeddings = c.tie_word_embeddings},
         load_layer, names, rest);
    info_ = decoder_info(c, w.matrix_dtype());
  }
  void load(Weights& w, const DecoderSizes& c, const LoadLayer& load_layer,
            const DecoderNames& names, const std::function<void(Weights&)>& rest);

  std::vector<Rope> ropes_;  // rotary schedules; tables are computed once per step for each
  Tensor embed_, lm_head_;
  Tensor lm_head_bias_;  // undefined: none
  Norm final_norm_;
  float embed_scale_ = 1;
};

// A Decoder whose layers are DecoderLayers, each with a KV cache of its attention's window.
class LayerStack : public Decoder {
 public:
  std::vector<LayerStateSpec> layer_states() const override;

 protected:
  graph::Value layer(graph::Builder& g, int64_t i, graph::Value x,
                     const LayerInputs& in) const override;

  std::vector<DecoderLayer> layers_;
};

}  // namespace lathe
