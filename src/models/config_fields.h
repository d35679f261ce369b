// Reading config.json fields as transformers' config classes do: activations, sizes checked
// before anything is allocated from them, nullable and aliased fields, legacy rotary fields.
#pragma once

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "io/checkpoint.h"
#include "io/json.h"
#include "models/model.h"

namespace lathe {

// Reads an activation field (hidden_act, hidden_activation) with its config-class default.
// A value lathe does not implement is an error naming the field.
graph::Activation read_activation(const JsonFields& f, const std::string& field,
                                  const std::string& fallback, const std::string& architecture);

// Throws naming the field unless each size is in (0, 2^31].
void check_sizes(const JsonFields& f, std::initializer_list<std::pair<const char*, int64_t>> sizes);

// A copy of config.json with rope_parameters as the config class forms it where it reads
// legacy fields (GPTNeoXConfig: rotary_emb_base, rotary_pct): rope_scaling or rope_parameters,
// given rope_theta and partial_rotary_factor from those fields (or the defaults) unless set.
Json with_legacy_rope_fields(const JsonFields& f, const char* theta_field, double theta,
                             const char* partial_field, double partial);

// Reads a float field that a config class defaults to `fallback` but that config.json may set
// to null to turn the feature off (returned as 0), e.g. Gemma2 final_logit_softcapping.
float read_nullable_float(const JsonFields& f, const std::string& field, float fallback);

// An integer field that a config class's attribute_map also accepts under another name
// (GPT2Config n_embd / hidden_size): `field` when present, else `alias`, else `fallback`.
int64_t read_int_alias(const JsonFields& f, const std::string& field, const std::string& alias,
                       int64_t fallback);

// Per-layer windows from layer_types and sliding_window, as Cohere2Config and Olmo3Config read
// them: layer_types (each "sliding_attention" or "full_attention") when config.json has it, else
// every layer slides but each pattern-th ((i + 1) % pattern == 0 is full). Sliding layers get
// sliding_window (default `default_window`), full ones 0. Both models build their sliding mask
// whatever the layers are, and fail without a window: sliding_window must be positive.
std::vector<int64_t> read_layer_type_windows(const JsonFields& f, int64_t num_layers,
                                             int64_t pattern, int64_t default_window);

// The sizes most config classes name alike, with the class's defaults.
struct SizeDefaults {
  int64_t vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_layers = 0;
  int64_t max_position_embeddings = 0;
};
// Reads vocab_size, hidden_size, intermediate_size, num_hidden_layers and
// max_position_embeddings into a config struct with those members, and its architecture; the
// caller checks them (check_sizes) with the fields it reads after.
template <class Config>
void read_sizes(const Checkpoint& ckpt, const JsonFields& f, const SizeDefaults& d, Config& c) {
  c.architecture = ckpt.architecture();
  c.vocab_size = f.get_or<int64_t>("vocab_size", d.vocab_size);
  c.hidden_size = f.get_or<int64_t>("hidden_size", d.hidden_size);
  c.intermediate_size = f.get_or<int64_t>("intermediate_size", d.intermediate_size);
  c.num_layers = f.get_or<int64_t>("num_hidden_layers", d.num_layers);
  c.max_position_embeddings =
      f.get_or<int64_t>("max_position_embeddings", d.max_position_embeddings);
}

// What a loaded decoder reports about itself, from any config struct with the usual fields
// (architecture, vocab_size, hidden_size, num_layers, attention, max_position_embeddings).
template <class Config>
ModelInfo decoder_info(const Config& c, DType weight_dtype) {
  ModelInfo info;
  info.architecture = c.architecture;
  info.vocab_size = c.vocab_size;
  info.hidden_size = c.hidden_size;
  info.num_layers = c.num_layers;
  info.kv_heads = c.attention.kv_heads;
  info.head_dim = c.attention.head_dim;
  info.max_position_embeddings = c.max_position_embeddings;
  info.weight_dtype = weight_dtype;
  return info;
}

// Throws unless the checkpoint holds at least one tensor per layer: a config.json that claims
// more layers than that is wrong, and per-layer tables must not be sized from it.
void check_layer_count(const Checkpoint& ckpt, const JsonFields& f, int64_t num_layers);

}  // namespace lathe
