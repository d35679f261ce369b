// Block-scaled FP8 matrices run natively (DType::FP8, core/fp8.h): lathe's layout dequantizes
// to transformers' values (Fp8Dequantize's f32(code) * scale) bit for bit; blocks the layout
// cannot hold exactly are dequantized at load instead; the fixture qwen3_fp8_blocks passes its
// goldens on the native and the dequantizing path, whose logits are the same bits on the
// reference kernels; its matrices take 36 bytes per 32 values where the dequantized ones took
// 128 (f32); and --quantize leaves FP8 matrices as they are.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "backends/cpu/isa.h"
#include "core/fp8.h"
#include "graph/quantize.h"
#include "io/safetensors.h"
#include "io/tiny_checkpoint.h"
#include "lab/golden_check.h"
#include "lab/tolerances.h"
#include "models/fp8.h"
#include "models/registry.h"
#include "support/run.h"
#include "support/weight_bytes.h"

namespace lathe {
namespace {
namespace fs = std::filesystem;
using testing::weight_bytes;

constexpr const char* kFixture = "qwen3_fp8_blocks";

// Codes of every finite value (NaN codes replaced by 0), and a scale grid of `grid_rows` x
// `grid_cols` per matrix spanning subnormal to large scales.
struct Fp8Matrix {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
};
Fp8Matrix random_fp8(const Shape& shape, int64_t grid_rows, int64_t grid_cols, int seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  Fp8Matrix c;
  for (int64_t i = 0; i < shape_numel(shape); ++i) {
    const auto code = static_cast<uint8_t>(rng() & 0xff);
    c.codes.push_back((code & 0x7f) == 0x7f ? 0 : code);
  }
  const int64_t grids = shape_numel(shape) / (shape[shape.size() - 2] * shape.back());
  for (int64_t i = 0; i < grids * grid_rows * grid_cols; ++i)
    c.scales.push_back(std::ldexp(1.0f + static_cast<float>(rng() % 1000) / 1000.0f,
                                  static_cast<int>(rng() % 200) - 140));
  return c;
}

TEST(Fp8Native, LayoutDequantizesAsTransformers) {
  const Shape shape = {2, 48, 128};  // two matrices, blocks of 16 rows x 64 columns
  const Fp8Matrix c = random_fp8(shape, 3, 2, 5);
  const Tensor packed = pack_fp8(c.codes, shape, c.scales, 3, 2);
  ASSERT_TRUE(packed.defined());
  ASSERT_EQ(packed.dtype(), DType::FP8);
  EXPECT_EQ(packed.nbytes(), static_cast<size_t>(shape_numel(shape) / 32 * 36));
  const Tensor want = dequantize_fp8(c.codes, shape, c.scales, 3, 2, DType::F32);
  const Tensor got = packed.to(DType::F32);  // convert_to_f32
  ASSERT_EQ(got.numel(), want.numel());
  EXPECT_EQ(std::memcmp(got.data<float>(), want.data<float>(), want.nbytes()), 0);
  int subnormal = 0;
  for (int64_t i = 0; i < got.numel(); ++i)
    subnormal += std::fpclassify(got.data<float>()[i]) == FP_SUBNORMAL;
  EXPECT_GT(subnormal, 0) << "the scales reach subnormal weights";
}

TEST(Fp8Native, BlocksTheLayoutCannotHoldExactlyAreLeftToDequantizing) {
  const Shape shape = {32, 64};
  Fp8Matrix c = random_fp8(shape, 2, 2, 6);
  EXPECT_TRUE(pack_fp8(c.codes, shape, c.scales, 2, 2).defined());
  // Blocks of 16 columns: the layout's blocks are 32 values of one scale.
  EXPECT_FALSE(pack_fp8(c.codes, shape, std::vector<float>(8, 1.0f), 2, 4).defined());
  // A scale whose times 2^8 overflows: the kernels' f16 path would not be exact.
  Fp8Matrix big = c;
  big.scales[3] = std::ldexp(1.0f, 121);
  EXPECT_FALSE(pack_fp8(big.codes, shape, big.scales, 2, 2).defined());
  big.scales[3] = std::ldexp(1.5f, 119);
  EXPECT_TRUE(pack_fp8(big.codes, shape, big.scales, 2, 2).defined());
  // A NaN code would read as 480.
  Fp8Matrix nan = c;
  nan.codes[100] = 0xff;
  EXPECT_FALSE(pack_fp8(nan.codes, shape, nan.scales, 2, 2).defined());
}

TEST(Fp8Native, QuantizerMakesBlocksAsCheckpointsAre) {
  std::vector<float> v(64);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(static_cast<float>(i)) * 3.0f;
  v[40] = -7.5f;  // the second block's largest magnitude
  uint8_t q[2 * kFp8BlockBytes];
  fp8_quantize(v.data(), q, 64);
  float scale;
  std::memcpy(&scale, q + kFp8BlockBytes, 4);
  EXPECT_EQ(scale, 7.5f / 448.0f);
  EXPECT_EQ(q[kFp8BlockBytes + 4 + 8], 0xfe);  // -448
  for (int i = 0; i < 32; ++i) EXPECT_EQ(q[kFp8BlockBytes + 4 + i], f32_to_e4m3(v[32 + i] / scale));
  const float zeros[32] = {};
  fp8_quantize(zeros, q, 32);
  std::memcpy(&scale, q, 4);
  EXPECT_EQ(scale, 0.0f);
  float back[32];
  fp8_dequantize(q, back, 32);
  for (float b : back) EXPECT_EQ(b, 0.0f);
}

ModelOptions options(std::optional<DType> dtype, bool dequantize) {
  ModelOptions o;
  o.dtype = dtype;
  o.dequantize_fp8 = dequantize;
  return o;
}

GoldenCheck check(const fs::path& work, bool dequantize, bool reference,
                  DType storage = DType::F32) {
  ThreadPool pool(2);
  Context ctx{&pool, reference, false};
  // An f16 checkpoint computes in f32 (its default; --dtype takes f32 or bf16).
  ModelOptions o = options({}, dequantize);
  if (storage != DType::F16) o.dtype = storage;
  return check_golden_fixture(testing::fixture_dir(kFixture), work, {storage, 1}, o, ctx);
}

TEST(Fp8Native, NativeAndDequantizedPathsPassTheGoldens) {
  testing::ScratchDir dir("fp8_paths");
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
    }
    // The reference FP8 kernel is the f32 reference on the dequantized matrix: equal figures
    // to the last bit.
    if (reference) {
      EXPECT_EQ(native.logits.nmse, dequantized.logits.nmse);
      EXPECT_EQ(native.decode.nmse, dequantized.decode.nmse);
    }
  }
  // f16 storage keeps the FP8 matrices exact (native); bf16 storage rounds them to bf16 as
  // transformers does in bf16 (check_golden_fixture dequantizes then). The opt-in avx512bf16
  // level rounds bf16 matrices' activations too: there bf16 is held to bf16's tolerance, as
  // the golden tests hold it (golden_test.cpp's expect_rounded_match).
  for (DType storage : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(storage));
    const GoldenCheck r = check(dir.path() / "s", false, false, storage);
    ASSERT_TRUE(r.rounded);
    const bool bf16_activations =
        storage == DType::BF16 && cpu::active_isa() == cpu::Isa::Avx512Bf16;
    EXPECT_LE(r.rounded->logits.nmse, bf16_activations ? kBf16Nmse : kF32Nmse);
  }
}

TEST(Fp8Native, MatricesHoldThirtySixBytesPerThirtyTwoValues) {
  testing::ScratchDir dir("fp8_bytes");
  build_tiny_checkpoint(testing::fixture_dir(kFixture), dir.path(), {});
  int64_t values = 0;
  {
    const SafetensorsFile file = SafetensorsFile::open(dir.path() / "model.safetensors");
    for (const auto& [name, entry] : file.entries())
      if (entry.dtype_name == "F8_E4M3") values += shape_numel(entry.shape);
  }
  ASSERT_GT(values, 0);
  // A checkpoint serves one load (its converted tensors' pages are given back): one each.
  auto load = [&](const ModelOptions& o) { return load_model(Checkpoint::open(dir.path()), o); };
  const auto native = weight_bytes(*load({}));
  const auto f32 = weight_bytes(*load(options({}, true)));
  ASSERT_TRUE(native.count(DType::FP8));
  EXPECT_EQ(native.at(DType::FP8), static_cast<uint64_t>(values / 32 * 36));
  EXPECT_FALSE(f32.count(DType::FP8));
  EXPECT_EQ(f32.at(DType::F32) - native.at(DType::F32), static_cast<uint64_t>(values * 4));
}

TEST(Fp8Native, QuantizeLeavesFp8MatricesAlone) {
  graph::WeightQuantizer q(DType::Q8_0);
  const Tensor m = Tensor::zeros(DType::F32, {4, 64}).to(DType::FP8);
  EXPECT_FALSE(q.applies(m));
  EXPECT_EQ(q.get(m).dtype(), DType::FP8);
  testing::ScratchDir dir("fp8_q8");
  build_tiny_checkpoint(testing::fixture_dir(kFixture), dir.path(), {});
  ModelOptions q8;
  q8.quantize = DType::Q8_0;
  const auto bytes = weight_bytes(*load_model(Checkpoint::open(dir.path()), q8));
  EXPECT_TRUE(bytes.count(DType::FP8));
  EXPECT_TRUE(bytes.count(DType::Q8_0));  // the lm_head
}

}  // namespace
}  // namespace lathe
