#include "io/tiny_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "core/error.h"
#include "core/fp8.h"
#include "core/mxfp4.h"
#include "io/durable.h"
#include "io/json.h"
#include "io/safetensors.h"

namespace lathe {
namespace fs = std::filesystem;
namespace {

uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

uint64_t splitmix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// An FP8 fixture's block size: its config.json's quantization_config weight_block_size when
// quant_method is "fp8", else none ({0, 0}).
std::pair<int64_t, int64_t> fp8_block(const fs::path& config_path) {
  if (!fs::exists(config_path)) return {0, 0};
  const Json config = read_json_file(config_path);
  if (!config.contains("quantization_config")) return {0, 0};
  JsonFields q(config.at("quantization_config"),
               cat(config_path.string(), ": field \"quantization_config\""));
  if (q.get<std::string>("quant_method") != "fp8") return {0, 0};
  const Json& b = q.at("weight_block_size");
  if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() || !b[1].is_number_integer() ||
      b[0].get<int64_t>() < 1 || b[1].get<int64_t>() < 1)
    fail(q.origin(), ": weight_block_size must be two positive integers");
  return {b[0].get<int64_t>(), b[1].get<int64_t>()};
}

// The tensors an FP8 fixture stores quantized, as tools/reference/make_tiny.py chooses them:
// the decoder layers' 2-D projection weights whose sides the block divides.
bool fp8_quantized(const std::string& name, const Shape& shape, std::pair<int64_t, int64_t> block) {
  return block.first > 0 && shape.size() == 2 && name.ends_with(".weight") &&
         name.find(".layers.") != std::string::npos && name.find("norm") == std::string::npos &&
         shape[0] % block.first == 0 && shape[1] % block.second == 0;
}

// Block-scaled FP8 as DeepSeek V3 publishes it (and make_tiny.py writes it): per block the
// scale is max |w| / 448 and the codes are e4m3(w / scale); the scales are the weight's
// "_scale_inv" (F32, [rows / block, cols / block]). Appends the codes and the scales.
void append_fp8(const std::string& name, const std::vector<float>& w, const Shape& shape,
                std::pair<int64_t, int64_t> block, std::vector<NamedTensor>& out) {
  const int64_t rows = shape[0], cols = shape[1];
  const int64_t grid_rows = rows / block.first, grid_cols = cols / block.second;
  Tensor scales = Tensor::zeros(DType::F32, {grid_rows, grid_cols});
  NamedTensor codes{name, Tensor(), "F8_E4M3", shape, std::vector<uint8_t>(w.size())};
  for (int64_t br = 0; br < grid_rows; ++br)
    for (int64_t bc = 0; bc < grid_cols; ++bc) {
      float amax = 0;
      for (int64_t r = br * block.first; r < (br + 1) * block.first; ++r)
        for (int64_t c = bc * block.second; c < (bc + 1) * block.second; ++c)
          amax = std::max(amax, std::abs(w[static_cast<size_t>(r * cols + c)]));
      const float scale = amax / 448.0f;
      scales.mut<float>()[br * grid_cols + bc] = scale;
      for (int64_t r = br * block.first; r < (br + 1) * block.first; ++r)
        for (int64_t c = bc * block.second; c < (bc + 1) * block.second; ++c) {
          const size_t i = static_cast<size_t>(r * cols + c);
          codes.stored[i] = f32_to_e4m3(w[i] / scale);
        }
    }
  out.push_back(std::move(codes));
  out.push_back({name + "_scale_inv", scales});
}

// Whether a fixture's config.json has quantization_config quant_method "mxfp4".
bool mxfp4_fixture(const fs::path& config_path) {
  if (!fs::exists(config_path)) return false;
  const Json config = read_json_file(config_path);
  return config.contains("quantization_config") && config["quantization_config"].is_object() &&
         config["quantization_config"].value("quant_method", "") == "mxfp4";
}

// The tensors an MXFP4 fixture stores quantized, as tools/reference/make_tiny.py chooses them:
// GptOss's expert matrices, generated in transformers' parameter layout [experts, in, out].
bool mxfp4_quantized(const std::string& name, const Shape& shape) {
  return shape.size() == 3 && shape[1] % kMxfp4Block == 0 &&
         (name.ends_with(".mlp.experts.gate_up_proj") || name.ends_with(".mlp.experts.down_proj"));
}

// MXFP4 as GptOss checkpoints publish it (and make_tiny.py writes it): each expert's matrix
// transposed into rows [out, in], each row quantized in blocks of 32 by core/mxfp4.h's rule,
// stored as name + "_blocks" U8 [experts, out, in / 32, 16] and "_scales" U8 [experts, out,
// in / 32].
void append_mxfp4(const std::string& name, const std::vector<float>& w, const Shape& shape,
                  std::vector<NamedTensor>& out) {
  const int64_t experts = shape[0], in = shape[1], outs = shape[2], groups = in / kMxfp4Block;
  const auto count = static_cast<size_t>(experts * outs * groups);
  NamedTensor blocks{name + "_blocks",
                     Tensor(),
                     "U8",
                     {experts, outs, groups, 16},
                     std::vector<uint8_t>(count * kMxfp4CodeBytes)};
  NamedTensor scales{
      name + "_scales", Tensor(), "U8", {experts, outs, groups}, std::vector<uint8_t>(count)};
  std::vector<float> row(static_cast<size_t>(in));
  std::vector<uint8_t> packed(static_cast<size_t>(groups) * kMxfp4BlockBytes);
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t o = 0; o < outs; ++o) {
      for (int64_t i = 0; i < in; ++i) row[i] = w[static_cast<size_t>((e * in + i) * outs + o)];
      mxfp4_quantize(row.data(), packed.data(), in);
      for (int64_t g = 0; g < groups; ++g) {
        const size_t b = static_cast<size_t>((e * outs + o) * groups + g);
        scales.stored[b] = packed[g * kMxfp4BlockBytes];
        std::copy_n(packed.begin() + static_cast<int64_t>(g * kMxfp4BlockBytes) + 1,
                    kMxfp4CodeBytes, blocks.stored.begin() + static_cast<int64_t>(b * 16));
      }
    }
  out.push_back(std::move(blocks));
  out.push_back(std::move(scales));
}

// Bound on a generated tensor: tiny fixtures are kilobytes; this is not a model loader.
constexpr int64_t kMaxTinyElements = int64_t{1} << 28;

}  // namespace

std::vector<float> generate_weights(uint64_t seed, const std::string& name, int64_t count,
                                    double center, double scale) {
  std::vector<float> out(static_cast<size_t>(count));
  const uint64_t base = seed ^ fnv1a64(name);
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t z = splitmix64(base + static_cast<uint64_t>(i + 1) * 0x9E3779B97F4A7C15ull);
    const double u = (static_cast<double>(z >> 40) - 8388608.0) / 8388608.0;
    out[i] = static_cast<float>(center + scale * u);
  }
  return out;
}

size_t build_tiny_checkpoint(const fs::path& fixture, const fs::path& out,
                             const TinyBuildOptions& opts) {
  const fs::path manifest_path = fixture / "weights.json";
  const Json manifest = read_json_file(manifest_path);
  JsonFields m(manifest, manifest_path.string());
  const uint64_t seed = static_cast<uint64_t>(m.get<int64_t>("seed"));
  const Json& list = m.at("tensors");
  if (!list.is_array()) fail(manifest_path.string(), ": field \"tensors\" must be a list");
  if (opts.shards < 1 || opts.shards > 64) fail("shards must be between 1 and 64");

  const std::pair<int64_t, int64_t> block = fp8_block(fixture / "config.json");
  const bool mxfp4 = mxfp4_fixture(fixture / "config.json");
  std::vector<NamedTensor> tensors;
  for (size_t i = 0; i < list.size(); ++i) {
    JsonFields t(list[i], cat(manifest_path.string(), ": tensors[", i, "]"));
    const std::string name = t.get<std::string>("name");
    Shape shape;
    for (const Json& d : t.at("shape")) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) fail(t.origin(), ": bad shape");
      shape.push_back(d.get<int64_t>());
    }
    const int64_t n = shape_numel(shape);
    if (n > kMaxTinyElements) fail(t.origin(), ": ", n, " elements is not a tiny tensor");
    const auto values =
        generate_weights(seed, name, n, t.get<double>("center"), t.get<double>("scale"));
    if (t.has("dtype")) {
      // An integer table (DeepseekV4's hash router tid2eid): the floor of each value, as I32.
      if (t.get<std::string>("dtype") != "I32")
        fail(t.origin(), ": field \"dtype\" must be \"I32\" (the only integer table)");
      Tensor ints = Tensor::zeros(DType::I32, shape);
      for (int64_t j = 0; j < n; ++j)
        ints.mut<int32_t>()[j] = static_cast<int32_t>(std::floor(values[static_cast<size_t>(j)]));
      tensors.push_back({name, std::move(ints)});
      continue;
    }
    if (fp8_quantized(name, shape, block)) {
      append_fp8(name, values, shape, block, tensors);
      continue;
    }
    if (mxfp4 && mxfp4_quantized(name, shape)) {
      append_mxfp4(name, values, shape, tensors);
      continue;
    }
    Tensor f = Tensor::zeros(DType::F32, shape);
    std::copy(values.begin(), values.end(), f.mut<float>());
    tensors.push_back({name, f.to(opts.dtype)});
  }

  fs::create_directories(out);
  for (const char* file : {"config.json", "generation_config.json"})
    if (fs::exists(fixture / file))
      fs::copy_file(fixture / file, out / file, fs::copy_options::overwrite_existing);
  const std::map<std::string, std::string> meta = {{"format", "pt"}};
  if (opts.shards == 1) {
    write_safetensors(out / "model.safetensors", tensors, meta);
    return tensors.size();
  }
  // Round-robin the tensors over the shards, as an index maps them.
  Json weight_map = Json::object();
  for (int s = 0; s < opts.shards; ++s) {
    char file[64];
    std::snprintf(file, sizeof file, "model-%05d-of-%05d.safetensors", s + 1, opts.shards);
    std::vector<NamedTensor> part;
    for (size_t i = static_cast<size_t>(s); i < tensors.size();
         i += static_cast<size_t>(opts.shards)) {
      part.push_back(tensors[i]);
      weight_map[tensors[i].name] = file;
    }
    write_safetensors(out / file, part, meta);
  }
  std::ofstream index(out / "model.safetensors.index.json");
  index << Json{{"metadata", Json::object()}, {"weight_map", weight_map}}.dump(2) << "\n";
  if (!index) fail((out / "model.safetensors.index.json").string(), ": write failed");
  return tensors.size();
}

void scale_checkpoint_tensor(const std::filesystem::path& dir, const std::string& name,
                             float factor) {
  const std::filesystem::path file = dir / "model.safetensors";
  std::vector<NamedTensor> tensors;
  bool found = false;
  {
    const SafetensorsFile in = SafetensorsFile::open(file);
    for (const auto& [n, entry] : in.entries()) {
      Tensor t = in.tensor(n).clone();
      if (n == name) {
        if (t.dtype() != DType::F32) fail(file.string(), ": tensor ", name, " is not F32");
        for (int64_t i = 0; i < t.numel(); ++i) t.mut<float>()[i] *= factor;
        found = true;
      }
      tensors.push_back({n, std::move(t)});
    }
  }
  if (!found) fail(file.string(), ": no tensor ", name);
  write_safetensors(file, tensors);
}

void edit_config_number(const std::filesystem::path& dir, const std::string& field, double factor,
                        double offset) {
  const std::filesystem::path file = dir / "config.json";
  Json config = read_json_file(file);
  if (!config.is_object() || !config.contains(field) || !config[field].is_number())
    fail(file.string(), ": field \"", field, "\" must be a number to edit");
  config[field] = config[field].get<double>() * factor + offset;
  write_file_atomic(file, config.dump(2) + "\n");
}

}  // namespace lathe
