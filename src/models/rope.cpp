#include "models/rope.h"

#include <cmath>
#include <numbers>

#include "core/error.h"

namespace lathe {
namespace {

// theta^(2i / dim) for i < dim / 2, in f32 as torch computes it.
std::vector<float> theta_powers(double theta, int64_t dim) {
  std::vector<float> f(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float e = static_cast<float>(2 * i) / static_cast<float>(dim);
    f[i] = std::pow(static_cast<float>(theta), e);
  }
  return f;
}

std::vector<float> base_inv_freq(double theta, int64_t dim) {
  auto f = theta_powers(theta, dim);
  for (float& x : f) x = 1.0f / x;
  return f;
}

double yarn_mscale(double scale, double m) {
  return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0;
}

std::vector<double> read_factor_list(const JsonFields& f, const std::string& key, int64_t n) {
  const Json& v = f.at(key);
  if (!v.is_array() || static_cast<int64_t>(v.size()) != n)
    fail(f.origin(), ": field \"", key, "\" must be a list of ", n, " numbers");
  std::vector<double> out;
  for (const Json& x : v) {
    if (!x.is_number()) fail(f.origin(), ": field \"", key, "\" holds a non-number");
    out.push_back(x.get<double>());
  }
  return out;
}

// The queries' position scale in f32: Llama4TextAttention's attn_scales (temperature tuning), or
// get_llama_4_attn_scale's 1 + beta * log(1 + floor(pos / length)); 1 without either.
float llama_4_scale(const RopeConfig& c, int64_t pos) {
  if (c.temperature_attn_scale != 0) {  // Llama4TextAttention's attn_scales, in f32
    const float blocks = std::floor((static_cast<float>(pos) + 1.0f) /
                                    static_cast<float>(c.temperature_floor_scale));
    return std::log1p(blocks) * static_cast<float>(c.temperature_attn_scale) + 1.0f;
  }
  if (c.llama_4_scaling_beta == 0) return 1.0f;
  const float blocks =
      std::floor(static_cast<float>(pos) / static_cast<float>(c.llama_4_scaling_length));
  return 1.0f + static_cast<float>(c.llama_4_scaling_beta) * std::log(1.0f + blocks);
}

}  // namespace

void rotate_whole_head(RopeConfig& r, const std::string& origin, const std::string& architecture) {
  if (r.kind == RopeKind::Default)
    r.rot_dim = r.head_dim;
  else if (r.rot_dim != r.head_dim)
    fail(origin, ": field \"partial_rotary_factor\" gives ", r.rot_dim, " rotary dims of head_dim ",
         r.head_dim, "; ", architecture, " rotates the whole head");
}

RopeConfig read_rope_config(const JsonFields& cfg, int64_t head_dim,
                            int64_t max_position_embeddings, double default_theta,
                            double default_partial) {
  RopeConfig r;
  r.head_dim = head_dim;
  r.max_position_embeddings = max_position_embeddings;
  // transformers >= 5 writes rope_parameters; older configs have rope_theta + rope_scaling.
  Json params = Json::object();
  std::string field = "rope_parameters";
  if (cfg.has("rope_parameters")) {
    params = cfg.at("rope_parameters");
  } else if (cfg.has("rope_scaling")) {
    params = cfg.at("rope_scaling");
    field = "rope_scaling";
  }
  if (!params.is_object()) fail(cfg.origin(), ": field \"", field, "\" must be an object");
  JsonFields p(params, cfg.origin() + " (" + field + ")");
  r.theta = p.get_or<double>("rope_theta", cfg.get_or<double>("rope_theta", default_theta));
  const double partial = p.get_or<double>(
      "partial_rotary_factor", cfg.get_or<double>("partial_rotary_factor", default_partial));
  const std::string type = p.has("rope_type") ? p.get<std::string>("rope_type")
                                              : p.get_or<std::string>("type", "default");
  // _compute_proportional_rope_parameters: int(partial_rotary_factor * head_dim // 2) pairs
  // rotate, over the whole head (rotate_half of head_dim), and the others get frequency 0.
  if (type == "proportional") {
    if (partial < 0 || partial > 1)
      fail(p.origin(), ": field \"partial_rotary_factor\" is ", partial, ", must be in [0, 1]");
    r.rotated_pairs = static_cast<int64_t>(std::floor(partial * static_cast<double>(head_dim) / 2));
  }
  r.rot_dim = type == "proportional"
                  ? head_dim
                  : static_cast<int64_t>(static_cast<double>(head_dim) * partial);
  if (r.rot_dim <= 0 || r.rot_dim > head_dim || r.rot_dim % 2 != 0)
    fail(cfg.origin(), ": partial_rotary_factor ", partial, " gives ", r.rot_dim,
         " rotary dims of head_dim ", head_dim, " (need an even count)");

  if (type == "default")
    r.kind = RopeKind::Default;
  else if (type == "linear")
    r.kind = RopeKind::Linear;
  else if (type == "dynamic")
    r.kind = RopeKind::Dynamic;
  else if (type == "yarn")
    r.kind = RopeKind::Yarn;
  else if (type == "llama3")
    r.kind = RopeKind::Llama3;
  else if (type == "longrope")
    r.kind = RopeKind::LongRope;
  else if (type == "proportional")
    r.kind = RopeKind::Proportional;
  else
    fail(p.origin(), ": field \"rope_type\" is \"", type,
         "\", which lathe does not implement (supported: default, linear, dynamic, yarn, "
         "llama3, longrope, proportional)");

  // Scaled kinds record the pre-training length (Phi-3 keeps it at the top level).
  r.original_max_position_embeddings =
      cfg.has("original_max_position_embeddings")
          ? cfg.get<int64_t>("original_max_position_embeddings")
          : p.get_or<int64_t>("original_max_position_embeddings", max_position_embeddings);
  switch (r.kind) {
    case RopeKind::Default:
      break;
    case RopeKind::Linear:
    case RopeKind::Dynamic:
      r.factor = p.get<double>("factor");
      break;
    case RopeKind::Yarn:
      r.factor = p.has("factor") ? p.get<double>("factor")
                                 : static_cast<double>(max_position_embeddings) /
                                       static_cast<double>(r.original_max_position_embeddings);
      r.attention_factor = p.get_optional<double>("attention_factor");
      r.mscale = p.get_optional<double>("mscale");
      r.mscale_all_dim = p.get_optional<double>("mscale_all_dim");
      // transformers: `get("beta_fast") or 32`, so 0 also means the default.
      if (p.has("beta_fast") && p.get<double>("beta_fast") != 0)
        r.beta_fast = p.get<double>("beta_fast");
      if (p.has("beta_slow") && p.get<double>("beta_slow") != 0)
        r.beta_slow = p.get<double>("beta_slow");
      r.truncate = p.get_or<bool>("truncate", true);
      break;
    case RopeKind::Llama3:
      r.factor = p.get<double>("factor");
      r.low_freq_factor = p.get<double>("low_freq_factor");
      r.high_freq_factor = p.get<double>("high_freq_factor");
      break;
    case RopeKind::LongRope:
      r.long_factor = read_factor_list(p, "long_factor", r.rot_dim / 2);
      r.short_factor = read_factor_list(p, "short_factor", r.rot_dim / 2);
      r.factor = p.has("factor") ? p.get<double>("factor")
                                 : static_cast<double>(max_position_embeddings) /
                                       static_cast<double>(r.original_max_position_embeddings);
      r.attention_factor = p.get_optional<double>("attention_factor");
      break;
    case RopeKind::Proportional:
      r.factor = p.get_or<double>("factor", 1.0);
      break;
  }
  return r;
}

std::vector<float> Rope::inv_freq(int64_t seq_len, float* attention_factor) const {
  const RopeConfig& c = config_;
  const int64_t dim = c.rot_dim;
  *attention_factor = 1.0f;
  switch (c.kind) {
    case RopeKind::Default:
      return base_inv_freq(c.theta, dim);
    case RopeKind::Linear: {
      auto f = base_inv_freq(c.theta, dim);
      for (float& x : f) x /= static_cast<float>(c.factor);
      return f;
    }
    case RopeKind::Dynamic: {
      // NTK-aware: the base grows once the sequence outgrows max_position_embeddings.
      const float len = static_cast<float>(std::max(seq_len, c.max_position_embeddings));
      const float ratio =
          static_cast<float>(c.factor) * len / static_cast<float>(c.max_position_embeddings) -
          static_cast<float>(c.factor - 1);
      const float base = static_cast<float>(c.theta) *
                         std::pow(ratio, static_cast<float>(static_cast<double>(dim) / (dim - 2)));
      return base_inv_freq(base, dim);
    }
    case RopeKind::Yarn: {
      if (c.attention_factor) {
        *attention_factor = static_cast<float>(*c.attention_factor);
      } else if (c.mscale && c.mscale_all_dim && *c.mscale != 0 && *c.mscale_all_dim != 0) {
        *attention_factor = static_cast<float>(yarn_mscale(c.factor, *c.mscale) /
                                               yarn_mscale(c.factor, *c.mscale_all_dim));
      } else {
        *attention_factor = static_cast<float>(yarn_mscale(c.factor, 1));
      }
      auto correction_dim = [&](double rotations) {
        return dim *
               std::log(static_cast<double>(c.original_max_position_embeddings) /
                        (rotations * 2 * std::numbers::pi)) /
               (2 * std::log(c.theta));
      };
      double low = correction_dim(c.beta_fast), high = correction_dim(c.beta_slow);
      if (c.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
      }
      low = std::max(low, 0.0);
      high = std::min(high, static_cast<double>(dim - 1));
      if (low == high) high += 0.001;
      const auto pos_freq = theta_powers(c.theta, dim);
      std::vector<float> f(pos_freq.size());
      for (size_t i = 0; i < f.size(); ++i) {
        const float ramp = std::clamp(
            (static_cast<float>(i) - static_cast<float>(low)) / static_cast<float>(high - low),
            0.0f, 1.0f);
        const float extrapolation = 1.0f - ramp;
        const float interp = 1.0f / (static_cast<float>(c.factor) * pos_freq[i]);
        const float extra = 1.0f / pos_freq[i];
        f[i] = interp * (1.0f - extrapolation) + extra * extrapolation;
      }
      return f;
    }
    case RopeKind::Llama3: {
      auto f = base_inv_freq(c.theta, dim);
      const float old_len = static_cast<float>(c.original_max_position_embeddings);
      const float low_wavelen = old_len / static_cast<float>(c.low_freq_factor);
      const float high_wavelen = old_len / static_cast<float>(c.high_freq_factor);
      const float factor = static_cast<float>(c.factor);
      for (float& x : f) {
        const float wavelen = 2.0f * std::numbers::pi_v<float> / x;
        const float scaled = wavelen > low_wavelen ? x / factor : x;
        if (wavelen < high_wavelen || wavelen > low_wavelen) {
          x = scaled;
        } else {
          const float smooth = (old_len / wavelen - static_cast<float>(c.low_freq_factor)) /
                               static_cast<float>(c.high_freq_factor - c.low_freq_factor);
          x = (1.0f - smooth) * scaled / factor + smooth * scaled;
        }
      }
      return f;
    }
    case RopeKind::LongRope: {
      if (c.phimoe_mscale) {
        *attention_factor = static_cast<float>(
            seq_len > c.original_max_position_embeddings ? c.long_mscale : c.short_mscale);
        auto f = theta_powers(c.theta, dim);
        for (size_t i = 0; i < f.size(); ++i)
          f[i] = 1.0f / (static_cast<float>(c.short_factor[i]) * f[i]);
        return f;
      }
      if (c.attention_factor) {
        *attention_factor = static_cast<float>(*c.attention_factor);
      } else if (c.factor > 1.0) {
        *attention_factor = static_cast<float>(
            std::sqrt(1 + std::log(c.factor) /
                              std::log(static_cast<double>(c.original_max_position_embeddings))));
      }
      const auto& ext =
          seq_len > c.original_max_position_embeddings ? c.long_factor : c.short_factor;
      auto f = theta_powers(c.theta, dim);
      for (size_t i = 0; i < f.size(); ++i) f[i] = 1.0f / (static_cast<float>(ext[i]) * f[i]);
      return f;
    }
    case RopeKind::Proportional: {
      // 1 / theta^(2i / head_dim) for i < rotated_pairs, then zeros; all divided by factor.
      std::vector<float> f(static_cast<size_t>(dim / 2), 0.0f);
      for (int64_t i = 0; i < c.rotated_pairs; ++i) {
        const float e = static_cast<float>(2 * i) / static_cast<float>(c.head_dim);
        f[i] = 1.0f / std::pow(static_cast<float>(c.theta), e);
      }
      for (float& x : f) x /= static_cast<float>(c.factor);
      return f;
    }
  }
  return {};
}

Rope::Rope(RopeConfig config) : config_(std::move(config)) {
  length_dependent_ = config_.kind == RopeKind::Dynamic || config_.kind == RopeKind::LongRope;
  if (!length_dependent_) fixed_freq_ = inv_freq(0, &fixed_factor_);
}

void Rope::fill(int64_t pos0, int64_t n, float* cos, float* sin, int64_t stride) const {
  float scale = fixed_factor_;
  std::vector<float> recomputed;
  if (length_dependent_) recomputed = inv_freq(pos0 + n, &scale);
  const std::vector<float>& freq = length_dependent_ ? recomputed : fixed_freq_;
  const int64_t half = static_cast<int64_t>(freq.size());
  for (int64_t t = 0; t < n; ++t) {
    const float position_scale = llama_4_scale(config_, pos0 + t);
    for (int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(pos0 + t) * freq[i];
      cos[t * stride + i] = std::cos(angle) * scale * position_scale;
      sin[t * stride + i] = std::sin(angle) * scale * position_scale;
    }
  }
}

uint64_t Rope::hash() const {
  // FNV-1a over every field of the config.
  uint64_t h = 0xcbf29ce484222325ull;
  auto add = [&](const auto& v) {
    const auto* b = reinterpret_cast<const uint8_t*>(&v);
    for (size_t i = 0; i < sizeof v; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  };
  const RopeConfig& c = config_;
  add(static_cast<int>(c.kind));
  for (double v :
       {c.theta, c.factor, c.beta_fast, c.beta_slow, c.low_freq_factor, c.high_freq_factor,
        c.attention_factor.value_or(-1), c.mscale.value_or(-1), c.mscale_all_dim.value_or(-1),
        c.llama_4_scaling_beta, c.short_mscale, c.long_mscale, c.temperature_attn_scale})
    add(v);
  for (int64_t v :
       {c.head_dim, c.rot_dim, c.max_position_embeddings, c.original_max_position_embeddings,
        c.llama_4_scaling_length, c.rotated_pairs, c.temperature_floor_scale})
    add(v);
  add(c.truncate);
  add(c.phimoe_mscale);
  for (const auto* list : {&c.long_factor, &c.short_factor}) {
    add(list->size());
    for (double v : *list) add(v);
  }
  return h;
}

void Rope::tables(int64_t pos0, int64_t n, Tensor* cos, Tensor* sin) const {
  float scale = 1.0f;
  const auto freq = inv_freq(pos0 + n, &scale);
  const int64_t half = static_cast<int64_t>(freq.size());
  *cos = Tensor::zeros(DType::F32, {n, half});
  *sin = Tensor::zeros(DType::F32, {n, half});
  float* c = cos->mut<float>();
  float* s = sin->mut<float>();
  for (int64_t t = 0; t < n; ++t) {
    const float position_scale = llama_4_scale(config_, pos0 + t);
    for (int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(pos0 + t) * freq[i];
      c[t * half + i] = std::cos(angle) * scale * position_scale;
      s[t * half + i] = std::sin(angle) * scale * position_scale;
    }
  }
}

}  // namespace lathe
