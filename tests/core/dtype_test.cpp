#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/dtype.h"
#include "core/tensor.h"

namespace lathe {
namespace {

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 lies exactly between two bf16 values: ties go to the even one (1.0).
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // Slightly above the tie rounds up.
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(-2.5f)), -2.5f);
}

TEST(DType, F16RoundTripsEveryHalf) {
  // Every finite f16 value converts to f32 and back unchanged.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t v = static_cast<uint16_t>(h);
    if ((v & 0x7c00) == 0x7c00) continue;  // inf / nan
    ASSERT_EQ(f32_to_f16(f16_to_f32(v)), v) << std::hex << h;
  }
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);               // rounds to infinity
}

TEST(Tensor, ConvertsBetweenDtypes) {
  Tensor t = Tensor::zeros(DType::F32, {2, 3});
  for (int i = 0; i < 6; ++i) t.mut<float>()[i] = 0.5f * static_cast<float>(i) - 1.0f;
  Tensor b = t.to(DType::BF16).to(DType::F32);
  Tensor h = t.to(DType::F16).to(DType::F32);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(b.data<float>()[i], t.data<float>()[i]);
    EXPECT_EQ(h.data<float>()[i], t.data<float>()[i]);
  }
  EXPECT_EQ(t.reshape({3, 2}).dim(0), 3);
  EXPECT_THROW(t.reshape({4, 2}), std::exception);
}

}  // namespace
}  // namespace lathe
