#include "models/features.h"

#include "core/error.h"

namespace lathe {

namespace {

struct Rule {
  const char* feature;
  std::vector<const char*> keys;  // any of these fields, present and not null/false/0
};

// Config fields that mark a computation no lathe architecture implements yet.
const std::vector<Rule>& rules() {
  // (Mixtures of experts and multi-head latent attention left this list when lathe gained
  // them: an unsupported MoE architecture lacks its own block, not the routing.)
  static const std::vector<Rule> r = {
      {"a vision encoder (image inputs)",
       {"vision_config", "vision_tower", "mm_vision_tower", "image_token_index", "image_token_id"}},
      {"an audio encoder", {"audio_config"}},
      {"state-space or linear-attention layers",
       {"ssm_cfg", "state_size", "ssm_state_size", "mamba_d_state", "linear_num_key_heads",
        "linear_conv_kernel_dim", "attn_layer_indices"}},
      {"an encoder-decoder stack", {"is_encoder_decoder"}},
      {"quantized weights", {"quantization_config"}},
      {"custom modeling code (auto_map, trust_remote_code)", {"auto_map"}},
  };
  return r;
}

bool present(const Json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  if (v.is_string()) return !v.get<std::string>().empty();
  return !v.empty();
}

std::string shown(const Json& v) {
  std::string s = v.is_object() ? std::string("{...}") : v.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

}  // namespace

std::vector<FeatureSignal> unsupported_features(const Json& config) {
  std::vector<FeatureSignal> out;
  if (!config.is_object()) return out;
  // Multimodal configs nest the language model's fields in text_config.
  for (const Rule& rule : rules()) {
    for (const char* key : rule.keys) {
      const Json* v = nullptr;
      std::string where = cat("config.json field \"", key, "\"");
      if (config.contains(key)) {
        v = &config[key];
      } else if (config.contains("text_config") && config["text_config"].is_object() &&
                 config["text_config"].contains(key)) {
        v = &config["text_config"][key];
        where = cat("config.json field \"text_config.", key, "\"");
      }
      if (v && present(*v)) {
        out.push_back({rule.feature, cat(where, " = ", shown(*v))});
        break;
      }
    }
  }
  return out;
}

}  // namespace lathe
