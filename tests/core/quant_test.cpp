// Block quantization (core/quant.h): the Q8_0 and Q4_0 rules on known answers, the byte layout
// the kernels read, and the error of a round trip.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/quant.h"
#include "core/tensor.h"
#include "io/json.h"

namespace lathe {
namespace {

std::vector<float> gaussian(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

uint16_t scale_of(const std::vector<uint8_t>& q, int block) {
  uint16_t d;
  std::memcpy(&d, q.data() + 2 * block, 2);
  return d;
}

TEST(Quant, TraitsGiveTheBitsPerValue) {
  EXPECT_EQ(row_bytes(DType::Q8_0, 64), 68u);  // 8.5 bits a value
  EXPECT_EQ(row_bytes(DType::Q4_0, 64), 36u);  // 4.5 bits a value
  EXPECT_EQ(row_bytes(DType::Q4_0, 4096), 4096u / 32 * 18);
  EXPECT_EQ(dtype_name(DType::Q8_0), "Q8_0");
  EXPECT_EQ(quant_type_from_name("q4_0"), DType::Q4_0);
  EXPECT_FALSE(quant_type_from_name("q5_k").has_value());
  // Not safetensors types: a checkpoint naming them is not read as quantized.
  EXPECT_FALSE(dtype_from_name("Q8_0").has_value());
}

TEST(Quant, Q8BlockScalesByItsLargestMagnitude) {
  std::vector<float> x(64, 0.0f);
  x[0] = -2.54f;  // the largest magnitude of block 0: code -127
  x[1] = 1.0f;
  x[40] = 0.5f;  // block 1: only one value, code 127
  std::vector<uint8_t> q(row_bytes(DType::Q8_0, 64));
  quantize_rows(DType::Q8_0, x.data(), q.data(), 1, 64);
  EXPECT_EQ(f16_to_f32(scale_of(q, 0)), f16_to_f32(f32_to_f16(2.54f / 127)));
  EXPECT_EQ(f16_to_f32(scale_of(q, 1)), f16_to_f32(f32_to_f16(0.5f / 127)));
  const uint8_t* codes = q.data() + 4;  // offset binary: code + 128
  EXPECT_EQ(codes[0], 128 - 127);
  EXPECT_EQ(codes[1], 128 + 50);  // 1.0 / (2.54 / 127) = 50
  EXPECT_EQ(codes[2], 128);
  EXPECT_EQ(codes[40], 128 + 127);
  std::vector<float> back(64);
  dequantize(DType::Q8_0, q.data(), back.data(), 64);
  EXPECT_EQ(back[1], f16_to_f32(scale_of(q, 0)) * 50);
  EXPECT_EQ(back[2], 0.0f);
}

TEST(Quant, Q4KeepsItsLargestValueAndPacksNibblesAsTheKernelsRead) {
  std::vector<float> x(64, 0.0f);
  x[3] = 4.0f;    // block 0's largest magnitude, positive: d = -0.5, code -8 (stored 0)
  x[5] = -1.0f;   // -1 / -0.5 = 2: stored 10
  x[35] = -8.0f;  // block 1: d = 1, code -8 (stored 0)
  x[36] = 7.0f;   // code 7 (stored 15)
  std::vector<uint8_t> q(row_bytes(DType::Q4_0, 64));
  quantize_rows(DType::Q4_0, x.data(), q.data(), 1, 64);
  EXPECT_EQ(f16_to_f32(scale_of(q, 0)), -0.5f);
  EXPECT_EQ(f16_to_f32(scale_of(q, 1)), 1.0f);
  const uint8_t* codes = q.data() + 4;
  // Byte j: value j in the low nibble, value j + 32 in the high one; zero is stored 8.
  EXPECT_EQ(codes[0], 0x88);  // values 0 and 32: both zero
  EXPECT_EQ(codes[3], 0x00);  // value 3 (-8) and value 35 (-8)
  EXPECT_EQ(codes[4], 0xf8);  // value 36 (7, stored 15) above value 4 (0, stored 8)
  EXPECT_EQ(codes[5], 0x8a);  // value 5 (2, stored 10), value 37 zero
  std::vector<float> back(64);
  dequantize(DType::Q4_0, q.data(), back.data(), 64);
  EXPECT_EQ(back[3], 4.0f);
  EXPECT_EQ(back[5], -1.0f);
  EXPECT_EQ(back[35], -8.0f);
  EXPECT_EQ(back[36], 7.0f);
}

// The GGUF reference quantizers' results (tools/reference/make_quant_goldens.py: the gguf
// package's Q8_0 and Q4_0, as ggml's reference rounds) on Gaussian rows at three scales, zeros,
// exact half steps (ties), a negative largest magnitude and tiny values: lathe's quantized
// values equal theirs bit for bit, so a checkpoint quantized here holds llama.cpp's numbers.
TEST(Quant, EqualsTheGgufReferenceQuantizers) {
  const Json g = read_json_file(std::string(LATHE_SOURCE_DIR) + "/tests/fixtures/quant/gguf.json");
  const auto shape = g.at("shape").get<std::vector<int64_t>>();
  const int64_t rows = shape.at(0), k = shape.at(1);
  auto floats = [&](const char* key) {
    std::vector<float> v;
    for (const Json& b : g.at(key)) v.push_back(std::bit_cast<float>(b.get<uint32_t>()));
    return v;
  };
  const std::vector<float> x = floats("input_bits");
  ASSERT_EQ(static_cast<int64_t>(x.size()), rows * k);
  for (auto [t, key] : {std::pair{DType::Q8_0, "q8_0_bits"}, std::pair{DType::Q4_0, "q4_0_bits"}}) {
    const std::vector<float> expected = floats(key);
    std::vector<uint8_t> q(static_cast<size_t>(rows) * row_bytes(t, k));
    quantize_rows(t, x.data(), q.data(), rows, k);
    std::vector<float> back(x.size());
    dequantize(t, q.data(), back.data(), rows * k);
    int mismatches = 0;
    for (size_t i = 0; i < x.size(); ++i)
      if (std::bit_cast<uint32_t>(back[i]) != std::bit_cast<uint32_t>(expected[i]) &&
          ++mismatches <= 5)
        ADD_FAILURE() << dtype_name(t) << " value " << i << " (row " << i / k << "): " << x[i]
                      << " -> " << back[i] << ", gguf " << expected[i];
    EXPECT_EQ(mismatches, 0) << dtype_name(t);
  }
}

TEST(Quant, ZeroBlocksStayZero) {
  std::vector<float> x(128, 0.0f);
  for (DType t : {DType::Q8_0, DType::Q4_0}) {
    std::vector<uint8_t> q(row_bytes(t, 128));
    quantize_rows(t, x.data(), q.data(), 1, 128);
    std::vector<float> back(128, 1.0f);
    dequantize(t, q.data(), back.data(), 128);
    for (float v : back) ASSERT_EQ(v, 0.0f) << dtype_name(t);
  }
}

// The error of a round trip on Gaussian weights: measured NMSE 2.9e-5 (Q8_0) and 7.4e-3
// (Q4_0) over 64 rows of 576 (quantization noise of a uniform step: d^2 / 12); each value is
// within half a step of where it started (a whole one where Q4_0 clamps; plus the f16
// rounding of the scale).
TEST(Quant, RoundTripErrorIsWithinAStep) {
  const int64_t rows = 64, k = 576;
  const std::vector<float> x = gaussian(static_cast<size_t>(rows * k), 7);
  for (auto [t, limit] : {std::pair{DType::Q8_0, 5e-5}, std::pair{DType::Q4_0, 1e-2}}) {
    std::vector<uint8_t> q(static_cast<size_t>(rows) * row_bytes(t, k));
    quantize_rows(t, x.data(), q.data(), rows, k);
    std::vector<float> back(x.size());
    dequantize(t, q.data(), back.data(), rows * k);
    double err = 0, ref = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      err += (back[i] - x[i]) * (back[i] - x[i]);
      ref += x[i] * x[i];
      const size_t group = i / 64, block = i / 32;
      uint16_t d16;
      std::memcpy(&d16, q.data() + group * (t == DType::Q8_0 ? 68 : 36) + 2 * (block % 2), 2);
      const float step = std::fabs(f16_to_f32(d16));
      // |q| |d16 - d| <= 128 * 2^-11 d: the f16 rounding of the scale. Q4_0's codes reach
      // -8 d (the block's largest magnitude) but only 7 d on the other side, so a value near
      // minus that is clamped up to a whole step away.
      const float steps = t == DType::Q8_0 ? 0.5f : 1.0f;
      ASSERT_LE(std::fabs(back[i] - x[i]), steps * step + 0.0625f * step + 1e-6f) << i;
    }
    EXPECT_LT(err / ref, limit) << dtype_name(t);
    EXPECT_GT(err / ref, limit / 100) << dtype_name(t);  // it did quantize
  }
}

TEST(Quant, TensorConvertsThroughTheQuantizedTypes) {
  const std::vector<float> x = gaussian(3 * 128, 11);
  Tensor t = Tensor::zeros(DType::F32, {3, 128});
  std::memcpy(t.mut<float>(), x.data(), x.size() * sizeof(float));
  const Tensor q = t.to(DType::Q8_0);
  EXPECT_EQ(q.nbytes(), 3 * row_bytes(DType::Q8_0, 128));
  // Row 1 of the whole matrix's conversion is row 1 quantized alone: rows are self-contained.
  std::vector<uint8_t> row(row_bytes(DType::Q8_0, 128));
  quantize_rows(DType::Q8_0, x.data() + 128, row.data(), 1, 128);
  EXPECT_EQ(std::memcmp(q.rows(1, 1).data<uint8_t>(), row.data(), row.size()), 0);
  const Tensor back = q.to(DType::F32);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(back.data<float>()[i], x[i], 0.05f);
}

}  // namespace
}  // namespace lathe
