#include "core/fp8.h"

#include <algorithm>
#include <array>

#include "core/error.h"

namespace lathe {
namespace {

void check_blocks(int64_t n) {
  if (n % kFp8Block != 0) fail("internal: ", n, " FP8 values are not whole blocks");
}

}  // namespace

bool fp8_block_exact(float scale, const uint8_t* codes, int64_t n) {
  if (!std::isfinite(scale * 256.0f)) return false;
  return std::none_of(codes, codes + n, [](uint8_t c) { return (c & 0x7f) == 0x7f; });
}

void fp8_dequantize(const void* src, float* dst, int64_t n) {
  check_blocks(n);
  static const auto kValues = [] {  // every code's value, once
    std::array<float, 256> v{};
    for (int c = 0; c < 256; ++c) v[static_cast<size_t>(c)] = e4m3_to_f32(static_cast<uint8_t>(c));
    return v;
  }();
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kFp8Block; ++b, p += kFp8BlockBytes) {
    float scale;
    std::memcpy(&scale, p, sizeof scale);
    float* out = dst + b * kFp8Block;
    for (int64_t i = 0; i < kFp8Block; ++i) out[i] = kValues[p[4 + i]] * scale;
  }
}

void fp8_quantize(const float* src, void* dst, int64_t n) {
  check_blocks(n);
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kFp8Block; ++b, p += kFp8BlockBytes) {
    const float* v = src + b * kFp8Block;
    float amax = 0;
    for (int64_t i = 0; i < kFp8Block; ++i) amax = std::max(amax, std::fabs(v[i]));
    const float scale = amax / 448.0f;
    std::memcpy(p, &scale, sizeof scale);
    for (int64_t i = 0; i < kFp8Block; ++i)
      p[4 + i] = scale > 0 ? f32_to_e4m3(v[i] / scale) : uint8_t{0};
  }
}

}  // namespace lathe
