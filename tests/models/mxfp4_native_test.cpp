// MXFP4 matrices run natively (DType::MXFP4, core/mxfp4.h): lathe's layout dequantizes to
// transformers' values bit for bit; its quantizer (which the tiny MXFP4 fixture is made with,
// here and in make_tiny.py) follows the OCP rule; the fixture gpt_oss_mxfp4_experts holds the
// blocks transformers loaded and passes its goldens on the native and the dequantizing path,
// whose logits are the same bits on the reference kernels; the experts take 17 bytes per 32
// values where the dequantized ones took 128 (f32) or 64 (bf16); and --quantize leaves MXFP4
// matrices as they are.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "backends/cpu/isa.h"
#include "core/mxfp4.h"
#include "graph/quantize.h"
#include "io/hub_http.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "io/tiny_checkpoint.h"
#include "lab/golden_check.h"
#include "lab/tolerances.h"
#include "models/engine.h"
#include "models/mxfp4.h"
#include "models/registry.h"
#include "support/run.h"
#include "support/weight_bytes.h"

namespace lathe {
namespace {
namespace fs = std::filesystem;

constexpr const char* kFixture = "gpt_oss_mxfp4_experts";

TEST(Mxfp4Native, LayoutDequantizesAsTransformers) {
  const Json j =
      read_json_file(std::string(LATHE_SOURCE_DIR) + "/tests/fixtures/mxfp4/dequantize.json");
  const auto blocks = j.at("blocks").get<std::vector<uint8_t>>();
  const auto scales = j.at("scales").get<std::vector<uint8_t>>();
  const Shape shape = j.at("shape").get<Shape>();
  const auto f32_bits = j.at("f32_bits").get<std::vector<uint32_t>>();
  const Tensor packed = pack_mxfp4(blocks, scales, shape);
  ASSERT_EQ(packed.dtype(), DType::MXFP4);
  EXPECT_EQ(packed.nbytes(), scales.size() * kMxfp4BlockBytes);
  const Tensor f = packed.to(DType::F32);  // convert_to_f32
  ASSERT_EQ(static_cast<size_t>(f.numel()), f32_bits.size());
  int subnormal = 0, inf = 0;
  for (size_t i = 0; i < f32_bits.size(); ++i) {
    uint32_t got;
    std::memcpy(&got, f.data<float>() + i, 4);
    EXPECT_EQ(got, f32_bits[i]) << "value " << i << ": " << f.data<float>()[i];
    subnormal += std::fpclassify(f.data<float>()[i]) == FP_SUBNORMAL;
    inf += std::isinf(f.data<float>()[i]);
  }
  EXPECT_GT(subnormal, 0) << "the fixture covers scale 0";
  EXPECT_GT(inf, 0) << "the fixture covers scale 255";
  // Every scale's value of every code, against ldexp (what torch.ldexp computes).
  for (int e = 0; e < 256; ++e)
    for (int c = 0; c < 16; ++c) {
      const float want = std::ldexp(kMxfp4Twice[c] / 2, e - 127);
      const float got = mxfp4_value(c, static_cast<uint8_t>(e));
      EXPECT_EQ(std::memcmp(&got, &want, 4), 0) << "code " << c << " scale " << e;
    }
}

TEST(Mxfp4Native, QuantizerFollowsTheOcpRule) {
  // Ties go to the even code; magnitudes past 6 saturate; the sign bit follows v < 0.
  EXPECT_EQ(e2m1_code(0.25f), 0);
  EXPECT_EQ(e2m1_code(0.26f), 1);
  EXPECT_EQ(e2m1_code(0.75f), 2);
  EXPECT_EQ(e2m1_code(1.25f), 2);
  EXPECT_EQ(e2m1_code(1.75f), 4);
  EXPECT_EQ(e2m1_code(2.5f), 4);
  EXPECT_EQ(e2m1_code(3.5f), 6);
  EXPECT_EQ(e2m1_code(5.0f), 6);
  EXPECT_EQ(e2m1_code(5.01f), 7);
  EXPECT_EQ(e2m1_code(100.0f), 7);
  EXPECT_EQ(e2m1_code(-1.5f), 11);
  EXPECT_EQ(e2m1_code(-0.1f), 8);
  EXPECT_EQ(e2m1_code(-0.0f), 8);
  // The scale is 2^(floor(log2 max|v|) - 2): a block whose largest value is 3.0 gets 2^-1, so
  // 3.0 is code 6 (4 x 0.5... 3.0 / 0.5 = 6) and the block's values 0.25 steps apart round.
  float v[32];
  for (int t = 0; t < 32; ++t) v[t] = (t % 2 ? -1.0f : 1.0f) * 0.125f * static_cast<float>(t % 25);
  v[31] = 3.0f;
  uint8_t block[kMxfp4BlockBytes];
  mxfp4_quantize(v, block, 32);
  EXPECT_EQ(block[0], 127 - 1);
  float back[32];
  mxfp4_dequantize(block, back, 32);
  for (int t = 0; t < 32; ++t) {
    EXPECT_EQ(back[t], mxfp4_value(e2m1_code(v[t] * 2.0f), block[0])) << t;
    EXPECT_LE(std::fabs(back[t] - v[t]), 0.5f) << t;  // within half a step of 1.0 at 2^-1
  }
  EXPECT_EQ(back[31], 3.0f);
  // Values already on the grid come back exactly, and a block of zeros is scale byte 0.
  float grid[32];
  mxfp4_dequantize(block, grid, 32);
  uint8_t again[kMxfp4BlockBytes];
  mxfp4_quantize(grid, again, 32);
  EXPECT_EQ(std::memcmp(block, again, kMxfp4BlockBytes), 0);
  const float zeros[32] = {};
  mxfp4_quantize(zeros, again, 32);
  EXPECT_EQ(again[0], 0);
}

TEST(Mxfp4Native, FixtureCheckpointHoldsTheBlocksTransformersLoaded) {
  testing::ScratchDir dir("mxfp4_fixture");
  build_tiny_checkpoint(testing::fixture_dir(kFixture), dir.path(), {});
  const SafetensorsFile file = SafetensorsFile::open(dir.path() / "model.safetensors");
  // make_tiny.py's digest: for each blocks name in order, the blocks, then their scales.
  hub::Digest digest(hub::Digest::Kind::Sha256, 0);
  int quantized = 0;
  for (const auto& [name, entry] : file.entries()) {
    if (!name.ends_with("_blocks")) continue;
    const std::string scales = name.substr(0, name.size() - 7) + "_scales";
    EXPECT_EQ(entry.dtype_name, "U8") << name;
    for (const std::string& n : {name, scales}) {
      const auto bytes = file.bytes(n);
      digest.update(bytes.data(), bytes.size());
    }
    ++quantized;
  }
  EXPECT_EQ(quantized, 3 * 2);  // gate_up and down of the 3 layers
  const Json goldens = read_json_file(fs::path(testing::fixture_dir(kFixture)) / "goldens.json");
  EXPECT_EQ(digest.hex(), goldens.at("mxfp4_sha256").get<std::string>());
}

ModelOptions options(std::optional<DType> dtype, bool dequantize) {
  ModelOptions o;
  o.dtype = dtype;
  o.dequantize_mxfp4 = dequantize;
  return o;
}

GoldenCheck check(const fs::path& work, bool dequantize, bool reference,
                  DType storage = DType::F32) {
  ThreadPool pool(2);
  Context ctx{&pool, reference, false};
  return check_golden_fixture(testing::fixture_dir(kFixture), work, {storage, 1},
                              options(storage, dequantize), ctx);
}

TEST(Mxfp4Native, NativeAndDequantizedPathsPassTheGoldens) {
  testing::ScratchDir dir("mxfp4_paths");
  for (bool reference : {false, true}) {
    const GoldenCheck native = check(dir.path() / "n", false, reference);
    const GoldenCheck dequantized = check(dir.path() / "d", true, reference);
    for (const GoldenCheck* r : {&native, &dequantized}) {
      SCOPED_TRACE(std::string(r == &native ? "native" : "dequantized") +
                   (reference ? ", reference" : ""));
      EXPECT_LE(r->logits.nmse, kF32Nmse);
      EXPECT_LE(r->decode.nmse, kF32Nmse);
      EXPECT_FALSE(r->layers.first_diverging) << *r->layers.first_diverging;
      EXPECT_EQ(r->greedy_actual, r->greedy_reference);
      EXPECT_GT(r->route_choices, 0);
      EXPECT_EQ(r->route_mismatches, 0);
    }
    // The reference MXFP4 kernel is the f32 reference on the dequantized matrix: equal
    // figures to the last bit (the fast kernels sum in the f32 kernels' lanes: equal on AVX2
    // and AVX-512 too, but the portable level sums the MXFP4 rows one by one).
    if (reference) {
      EXPECT_EQ(native.logits.nmse, dequantized.logits.nmse);
      EXPECT_EQ(native.decode.nmse, dequantized.decode.nmse);
    }
  }
  // bf16 storage: the dequantized experts are exact in bf16, the rounded goldens hold (to
  // bf16's tolerance on the opt-in avx512bf16 level, which rounds the activations of bf16
  // matrices too, as golden_test.cpp's expect_rounded_match holds it).
  const GoldenCheck bf16 = check(dir.path() / "b", false, false, DType::BF16);
  ASSERT_TRUE(bf16.rounded);
  EXPECT_LE(bf16.rounded->logits.nmse,
            cpu::active_isa() == cpu::Isa::Avx512Bf16 ? kBf16Nmse : kF32Nmse);
}

using testing::weight_bytes;

TEST(Mxfp4Native, ExpertsHoldSeventeenBytesPerThirtyTwoValues) {
  testing::ScratchDir dir("mxfp4_bytes");
  build_tiny_checkpoint(testing::fixture_dir(kFixture), dir.path(), {});
  // A checkpoint serves one load (its converted tensors' pages are given back): one each.
  auto load = [&](const ModelOptions& o) { return load_model(Checkpoint::open(dir.path()), o); };
  const Json c = Checkpoint::open(dir.path()).config();
  const int64_t values = c["num_hidden_layers"].get<int64_t>() *
                         c["num_local_experts"].get<int64_t>() * 3 *
                         c["intermediate_size"].get<int64_t>() * c["hidden_size"].get<int64_t>();
  const auto native = weight_bytes(*load({}));
  const auto f32 = weight_bytes(*load(options({}, true)));
  const auto bf16 = weight_bytes(*load(options(DType::BF16, true)));
  ASSERT_TRUE(native.count(DType::MXFP4));
  EXPECT_EQ(native.at(DType::MXFP4), static_cast<uint64_t>(values / 32 * 17));
  EXPECT_FALSE(f32.count(DType::MXFP4));
  EXPECT_EQ(f32.at(DType::F32) - native.at(DType::F32), static_cast<uint64_t>(values * 4));
  EXPECT_FALSE(bf16.count(DType::MXFP4));
  EXPECT_GE(bf16.at(DType::BF16), static_cast<uint64_t>(values * 2));
}

TEST(Mxfp4Native, QuantizeLeavesMxfp4MatricesAlone) {
  graph::WeightQuantizer q(DType::Q8_0);
  const Tensor m = Tensor::zeros(DType::F32, {4, 64}).to(DType::MXFP4);
  EXPECT_FALSE(q.applies(m));
  EXPECT_EQ(q.get(m).dtype(), DType::MXFP4);
  testing::ScratchDir dir("mxfp4_q8");
  build_tiny_checkpoint(testing::fixture_dir(kFixture), dir.path(), {});
  const Checkpoint ckpt = Checkpoint::open(dir.path());
  ModelOptions q8;
  q8.quantize = DType::Q8_0;
  const auto model = load_model(ckpt, q8);
  const auto bytes = weight_bytes(*model);
  EXPECT_TRUE(bytes.count(DType::MXFP4));
  EXPECT_TRUE(bytes.count(DType::Q8_0));  // the attention projections
}

}  // namespace
}  // namespace lathe
