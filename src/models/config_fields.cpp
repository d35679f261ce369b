#include "models/config_fields.h"

#include "core/error.h"

namespace lathe {

graph::Activation read_activation(const JsonFields& f, const std::string& field,
                                  const std::string& fallback, const std::string& architecture) {
  const std::string act = f.get_or<std::string>(field, fallback);
  if (act == "silu" || act == "swish") return graph::Activation::Silu;
  if (act == "gelu") return graph::Activation::Gelu;
  // NewGELUActivation (gelu_new) is the same tanh approximation, written out.
  if (act == "gelu_pytorch_tanh" || act == "gelu_new") return graph::Activation::GeluTanh;
  if (act == "relu") return graph::Activation::Relu;
  if (act == "relu2") return graph::Activation::Relu2;
  fail(f.origin(), ": field \"", field, "\" is \"", act, "\"; ", architecture,
       " in lathe implements \"silu\", \"gelu\", \"gelu_pytorch_tanh\", \"gelu_new\", "
       "\"relu\" and \"relu2\"");
}

float read_nullable_float(const JsonFields& f, const std::string& field, float fallback) {
  if (!f.json().contains(field)) return fallback;
  return static_cast<float>(f.get_or<double>(field, 0.0));
}

int64_t read_int_alias(const JsonFields& f, const std::string& field, const std::string& alias,
                       int64_t fallback) {
  return f.has(field) ? f.get<int64_t>(field) : f.get_or<int64_t>(alias, fallback);
}

void check_sizes(const JsonFields& f,
                 std::initializer_list<std::pair<const char*, int64_t>> sizes) {
  for (auto [name, v] : sizes)
    if (v <= 0 || v > (int64_t{1} << 31))
      fail(f.origin(), ": field \"", name, "\" is ", v, ", out of range");
}

Json with_legacy_rope_fields(const JsonFields& f, const char* theta_field, double theta,
                             const char* partial_field, double partial) {
  Json c = f.json();
  Json p = f.has("rope_scaling")      ? f.at("rope_scaling")
           : f.has("rope_parameters") ? f.at("rope_parameters")
                                      : Json::object();
  if (!p.is_object()) fail(f.origin(), ": field \"rope_parameters\" must be an object");
  if (!p.contains("rope_theta")) p["rope_theta"] = f.get_or<double>(theta_field, theta);
  if (!p.contains("partial_rotary_factor"))
    p["partial_rotary_factor"] = f.get_or<double>(partial_field, partial);
  c.erase("rope_scaling");
  c["rope_parameters"] = p;
  return c;
}

std::vector<int64_t> read_layer_type_windows(const JsonFields& f, int64_t num_layers,
                                             int64_t pattern, int64_t default_window) {
  const int64_t window = f.get_or<int64_t>("sliding_window", default_window);
  if (f.json().contains("sliding_window") && (!f.has("sliding_window") || window <= 0))
    fail(f.origin(), ": field \"sliding_window\" is ", f.json().at("sliding_window").dump(),
         "; it must be a positive window (transformers builds the sliding mask from it)");
  std::vector<bool> sliding(static_cast<size_t>(num_layers));
  if (f.has("layer_types")) {
    const Json& types = f.at("layer_types");
    if (!types.is_array() || static_cast<int64_t>(types.size()) != num_layers)
      fail(f.origin(), ": field \"layer_types\" must list ", num_layers, " layer types");
    for (int64_t i = 0; i < num_layers; ++i) {
      if (types[i] != "sliding_attention" && types[i] != "full_attention")
        fail(f.origin(), ": layer_types[", i, "] is ", types[i].dump(),
             "; lathe implements full_attention and sliding_attention");
      sliding[i] = types[i] == "sliding_attention";
    }
  } else {
    if (pattern <= 0)
      fail(f.origin(), ": field \"sliding_window_pattern\" is ", pattern, ", must be positive");
    for (int64_t i = 0; i < num_layers; ++i) sliding[i] = (i + 1) % pattern != 0;
  }
  std::vector<int64_t> windows(static_cast<size_t>(num_layers), 0);
  for (int64_t i = 0; i < num_layers; ++i)
    if (sliding[i]) windows[i] = window;
  return windows;
}

void check_layer_count(const Checkpoint& ckpt, const JsonFields& f, int64_t num_layers) {
  const size_t tensors = ckpt.tensor_names().size();
  if (num_layers > 0 && static_cast<uint64_t>(num_layers) > tensors)
    fail(f.origin(), ": field \"num_hidden_layers\" is ", num_layers, ", but the checkpoint holds ",
         tensors, " tensors (each layer has weights of its own)");
}

}  // namespace lathe
