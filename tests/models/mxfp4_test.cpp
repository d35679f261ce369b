// MXFP4 expert weights (GptOss checkpoints with quantization_config quant_method "mxfp4"):
// dequantization bit for bit as transformers' own function makes it
// (tests/fixtures/mxfp4/dequantize.json, tools/reference/make_mxfp4_goldens.py); a checkpoint
// whose experts are blocks and scales runs exactly as the unquantized checkpoint holding the
// dequantized matrices in transformers' parameter layout (which the tiny goldens cover); and
// malformed blocks, scales and quantization configs are errors naming them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json.h"
#include "io/tiny_checkpoint.h"
#include "models/mxfp4.h"
#include "models/registry.h"
#include "support/run.h"

namespace lathe {
namespace {
namespace fs = std::filesystem;
using Json = nlohmann::json;

TEST(Mxfp4, DequantizeMatchesTransformers) {
  const Json j =
      read_json_file(std::string(LATHE_SOURCE_DIR) + "/tests/fixtures/mxfp4/dequantize.json");
  const auto blocks = j.at("blocks").get<std::vector<uint8_t>>();
  const auto scales = j.at("scales").get<std::vector<uint8_t>>();
  const Shape shape = j.at("shape").get<Shape>();
  const auto f32_bits = j.at("f32_bits").get<std::vector<uint32_t>>();
  const auto bf16_bits = j.at("bf16_bits").get<std::vector<uint16_t>>();
  ASSERT_EQ(f32_bits.size(), static_cast<size_t>(shape_numel(shape)));
  const Tensor f = dequantize_mxfp4(blocks, scales, shape, DType::F32);
  const Tensor b = dequantize_mxfp4(blocks, scales, shape, DType::BF16);
  int subnormal = 0, inf = 0;
  for (size_t i = 0; i < f32_bits.size(); ++i) {
    uint32_t got;
    std::memcpy(&got, f.data<float>() + i, 4);
    EXPECT_EQ(got, f32_bits[i]) << "f32 value " << i << ": " << f.data<float>()[i];
    EXPECT_EQ(b.data<uint16_t>()[i], bf16_bits[i]) << "bf16 value " << i;
    subnormal += std::fpclassify(f.data<float>()[i]) == FP_SUBNORMAL;
    inf += std::isinf(f.data<float>()[i]);
  }
  EXPECT_GT(subnormal, 0) << "the fixture covers scale 0";
  EXPECT_GT(inf, 0) << "the fixture covers scale 255";
}

// A safetensors tensor by its stored bytes (any dtype, U8 included).
struct RawTensor {
  std::string name, dtype;
  Shape shape;
  std::vector<uint8_t> bytes;
};

void write_raw_safetensors(const fs::path& path, const std::vector<RawTensor>& tensors) {
  Json header = {{"__metadata__", {{"format", "pt"}}}};
  size_t offset = 0;
  for (const RawTensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  const uint64_t n = h.size();
  std::memcpy(out.data(), &n, 8);
  out += h;
  for (const RawTensor& t : tensors) out.append(t.bytes.begin(), t.bytes.end());
  testing::write_file(path, out);
}

RawTensor f32_tensor(const std::string& name, const Tensor& t) {
  const auto* p = t.data<uint8_t>();
  return {name, "F32", t.shape(), std::vector<uint8_t>(p, p + t.nbytes())};
}

// Bytes from a small counter generator (deterministic, no library dependence).
std::vector<uint8_t> counter_bytes(size_t n, uint32_t seed, int lo, int span) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (uint8_t& b : v) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(lo + static_cast<int>((x >> 24) % static_cast<uint32_t>(span)));
  }
  return v;
}

// [experts, a, b] -> [experts, b, a] (transformers' transpose(1, 2) of the dequantized rows).
Tensor swap_last(const Tensor& m) {
  const int64_t e = m.dim(0), a = m.dim(1), b = m.dim(2);
  Tensor out = Tensor::zeros(DType::F32, {e, b, a});
  for (int64_t x = 0; x < e; ++x)
    for (int64_t i = 0; i < a; ++i)
      for (int64_t j = 0; j < b; ++j)
        out.mut<float>()[(x * b + j) * a + i] = m.data<float>()[(x * a + i) * b + j];
  return out;
}

// Two checkpoints of gpt_oss_sliding_yarn_defaults with intermediate_size 32 (MXFP4 rows come
// in blocks of 32): `packed` with the experts as MXFP4 blocks and scales and
// quantization_config, `plain` with the same matrices dequantized, as transformers'
// parameters. `edit` may change the packed tensors and config before they are written.
struct Pair {
  testing::ScratchDir packed{"mxfp4"}, plain{"mxfp4_plain"};
};
using Edit = std::function<void(std::vector<RawTensor>&, Json&)>;

std::unique_ptr<Pair> make_pair(const Edit& edit = {}) {
  auto pair = std::make_unique<Pair>();
  testing::ScratchDir base("mxfp4_base");
  build_tiny_checkpoint(testing::fixture_dir("gpt_oss_sliding_yarn_defaults"), base.path(), {});
  Json config = Json::parse(testing::read_file(base.path() / "config.json"));
  const int64_t experts = config["num_local_experts"], hidden = config["hidden_size"];
  const int64_t layers = config["num_hidden_layers"], inter = 32;
  config["intermediate_size"] = inter;
  const SafetensorsFile file = SafetensorsFile::open(base.path() / "model.safetensors");
  std::vector<RawTensor> packed, plain;
  for (const auto& [name, e] : file.entries()) {
    if (name.find(".mlp.experts.") != std::string::npos) continue;
    const auto bytes = file.bytes(name);
    const RawTensor t{name, e.dtype_name, e.shape, {bytes.begin(), bytes.end()}};
    packed.push_back(t);
    plain.push_back(t);
  }
  for (int64_t i = 0; i < layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".mlp.experts.";
    const uint32_t seed = static_cast<uint32_t>(10 * i);
    struct M {
      const char* name;
      int64_t rows, cols;
    };
    for (const M& m : {M{"gate_up_proj", 2 * inter, hidden}, M{"down_proj", hidden, inter}}) {
      const int64_t groups = m.cols / kMxfp4Block;
      RawTensor blocks{
          p + m.name + "_blocks",
          "U8",
          {experts, m.rows, groups, 16},
          counter_bytes(static_cast<size_t>(experts * m.rows * groups * 16), seed + 1, 0, 256)};
      // Scales 2^-6 .. 2^-3: values of the size the tiny goldens' weights have.
      RawTensor scales{
          p + m.name + "_scales",
          "U8",
          {experts, m.rows, groups},
          counter_bytes(static_cast<size_t>(experts * m.rows * groups), seed + 2, 121, 4)};
      const Tensor rows =
          dequantize_mxfp4(blocks.bytes, scales.bytes, {experts, m.rows, m.cols}, DType::F32);
      plain.push_back(f32_tensor(p + m.name, swap_last(rows)));
      packed.push_back(std::move(blocks));
      packed.push_back(std::move(scales));
    }
    for (auto [name, n] : {std::pair{"gate_up_proj_bias", 2 * inter}, {"down_proj_bias", hidden}}) {
      Tensor bias = Tensor::zeros(DType::F32, {experts, n});
      for (int64_t k = 0; k < bias.numel(); ++k)
        bias.mut<float>()[k] = 0.01f * static_cast<float>((k * 37 + i) % 23 - 11);
      packed.push_back(f32_tensor(p + name, bias));
      plain.push_back(f32_tensor(p + name, bias));
    }
  }
  for (const fs::path& dir : {pair->packed.path(), pair->plain.path()})
    fs::copy_file(base.path() / "generation_config.json", dir / "generation_config.json");
  testing::write_file(pair->plain.path() / "config.json", config.dump());
  write_raw_safetensors(pair->plain.path() / "model.safetensors", plain);
  config["quantization_config"] = {
      {"quant_method", "mxfp4"},
      {"modules_to_not_convert",
       {"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"}}};
  if (edit) edit(packed, config);
  testing::write_file(pair->packed.path() / "config.json", config.dump());
  write_raw_safetensors(pair->packed.path() / "model.safetensors", packed);
  return pair;
}

Tensor logits(const fs::path& dir, std::optional<DType> dtype = {}, bool reference = false) {
  const Checkpoint ckpt = Checkpoint::open(dir);
  const auto model = load_model(ckpt, {.dtype = dtype});
  ThreadPool pool(2);
  Context ctx{&pool, reference, false};
  KVCache cache = model->new_cache(32);
  const std::vector<int32_t> ids = {5, 17, 99, 3, 64, 120, 7, 42, 11, 0, 88, 31};
  return model->forward(ctx, ids, cache, true);
}

TEST(Mxfp4, GptOssBlocksRunAsTheirDequantizedMatrices) {
  const auto pair = make_pair();
  const Tensor packed = logits(pair->packed.path()), plain = logits(pair->plain.path());
  ASSERT_EQ(packed.shape(), plain.shape());
  EXPECT_EQ(std::memcmp(packed.data<void>(), plain.data<void>(), packed.nbytes()), 0);
  // In bf16 (how a published MXFP4 checkpoint runs by default: its other weights are bf16),
  // the dequantized values are exact too: the same bits on the reference kernels. The fast
  // kernels add a bf16 matrix's products in another order than MXFP4 blocks' on AVX-512
  // (isa_kernels.inc's PairPolicy), so there the logits only agree closely.
  const Tensor packed_bf16 = logits(pair->packed.path(), DType::BF16, true);
  const Tensor plain_bf16 = logits(pair->plain.path(), DType::BF16, true);
  EXPECT_EQ(std::memcmp(packed_bf16.data<void>(), plain_bf16.data<void>(), packed.nbytes()), 0);
  const Tensor packed_fast = logits(pair->packed.path(), DType::BF16);
  const Tensor plain_fast = logits(pair->plain.path(), DType::BF16);
  float most = 0.0f, worst = 0.0f;
  for (int64_t i = 0; i < packed_fast.numel(); ++i) {
    most = std::max(most, std::fabs(plain_fast.data<float>()[i]));
    worst = std::max(worst, std::fabs(packed_fast.data<float>()[i] - plain_fast.data<float>()[i]));
  }
  EXPECT_LE(worst, 1e-5f * most) << "largest logit " << most;  // 5.7e-6 of 16.2 seen
  // A different scale must show.
  const auto moved = make_pair([](std::vector<RawTensor>& t, Json&) {
    for (RawTensor& r : t)
      if (r.name == "model.layers.1.mlp.experts.down_proj_scales") r.bytes[3] += 1;
  });
  const Tensor other = logits(moved->packed.path());
  EXPECT_NE(std::memcmp(other.data<void>(), plain.data<void>(), plain.nbytes()), 0);
}

std::string load_error(const Edit& edit) {
  const auto pair = make_pair(edit);
  try {
    load_model(Checkpoint::open(pair->packed.path()), {});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_error(const Edit& edit, const std::string& message) {
  const std::string err = load_error(edit);
  EXPECT_NE(err.find(message), std::string::npos) << "expected \"" << message << "\" in: " << err;
}

TEST(Mxfp4, MalformedBlocksScalesAndConfigsAreErrorsNamingThem) {
  const std::string p = "model.layers.0.mlp.experts.";
  auto edit_tensor = [](const std::string& name, std::function<void(RawTensor&)> f) -> Edit {
    return [name, f](std::vector<RawTensor>& t, Json&) {
      for (RawTensor& r : t)
        if (r.name == name) f(r);
    };
  };
  // Blocks of 16 values instead of 32 (8 bytes), scales of another group count, a dtype.
  const std::string blocks = load_error(edit_tensor(p + "gate_up_proj_blocks", [](RawTensor& r) {
    r.shape = {5, 64, 4, 8};
  }));
  EXPECT_NE(blocks.find("tensor \"" + p + "gate_up_proj_blocks\" in "), std::string::npos)
      << blocks;
  EXPECT_NE(blocks.find("is U8 [5, 64, 4, 8], expected U8 [5, 64, 2, 16]"), std::string::npos)
      << blocks;
  const std::string scales = load_error(edit_tensor(p + "down_proj_scales", [](RawTensor& r) {
    r.shape = {5, 32, 2};
  }));
  EXPECT_NE(scales.find("tensor \"" + p + "down_proj_scales\" in "), std::string::npos) << scales;
  EXPECT_NE(scales.find("is U8 [5, 32, 2], expected U8 [5, 64, 1]"), std::string::npos) << scales;
  expect_error(edit_tensor(p + "down_proj_blocks", [](RawTensor& r) { r.dtype = "I8"; }),
               "is I8 [5, 64, 1, 16], expected U8 [5, 64, 1, 16]");
  // Blocks without the scales.
  expect_error(
      [&](std::vector<RawTensor>& t, Json&) {
        std::erase_if(t, [&](const RawTensor& r) { return r.name == p + "down_proj_scales"; });
      },
      "missing tensors for GptOssForCausalLM: " + p + "down_proj_scales");
  // Another quantization method, and blocks without a quantization_config.
  expect_error(
      [](std::vector<RawTensor>&, Json& c) { c["quantization_config"]["quant_method"] = "fp8"; },
      "field \"quantization_config\" has quant_method \"fp8\"");
  expect_error([](std::vector<RawTensor>&, Json& c) { c.erase("quantization_config"); },
               "the checkpoint holds MXFP4 expert blocks "
               "(model.layers.0.mlp.experts.gate_up_proj_blocks) but config.json has no "
               "\"quantization_config\"");
  // Rows whose length is not a multiple of 32.
  expect_error([](std::vector<RawTensor>&, Json& c) { c["intermediate_size"] = 40; },
               "field \"intermediate_size\" is 40, not a multiple of the 32 values of an MXFP4 "
               "block");
}

}  // namespace
}  // namespace lathe
