#include "core/mxfp4.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"

namespace lathe {

uint8_t e2m1_code(float v) {
  // Midpoints between neighbouring magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6: past midpoint i the
  // magnitude code is at least i + 1; on it, the even one of codes i and i + 1.
  static constexpr float kMid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  const float a = std::fabs(v);
  uint8_t code = 0;
  for (int i = 0; i < 7; ++i)
    if (a > kMid[i] || (a == kMid[i] && i % 2 == 1)) code = static_cast<uint8_t>(i + 1);
  return std::signbit(v) ? code | 8 : code;
}

void mxfp4_dequantize(const void* src, float* dst, int64_t n) {
  if (n % kMxfp4Block != 0) fail("internal: ", n, " MXFP4 values are not whole blocks");
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kMxfp4Block; ++b, p += kMxfp4BlockBytes) {
    const float s = mxfp4_half_scale(p[0]);
    float* out = dst + b * kMxfp4Block;
    for (size_t i = 0; i < kMxfp4CodeBytes; ++i) {
      out[2 * i] = kMxfp4Twice[p[1 + i] & 0x0f] * s;
      out[2 * i + 1] = kMxfp4Twice[p[1 + i] >> 4] * s;
    }
  }
}

void mxfp4_quantize(const float* src, void* dst, int64_t n) {
  if (n % kMxfp4Block != 0) fail("internal: ", n, " MXFP4 values are not whole blocks");
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kMxfp4Block; ++b, p += kMxfp4BlockBytes) {
    const float* v = src + b * kMxfp4Block;
    float amax = 0;
    for (int64_t t = 0; t < kMxfp4Block; ++t) amax = std::max(amax, std::fabs(v[t]));
    int e = 0;  // the scale's exponent + 127
    if (amax > 0 && std::isfinite(amax)) {
      int exp;
      std::frexp(amax, &exp);  // amax = m 2^exp, m in [0.5, 1): floor(log2 amax) = exp - 1
      e = std::clamp(exp - 1 - 2 + 127, 0, 254);
    }
    p[0] = static_cast<uint8_t>(e);
    std::memset(p + 1, 0, kMxfp4CodeBytes);
    for (int64_t t = 0; t < kMxfp4Block; ++t) {
      const uint8_t c = e2m1_code(std::ldexp(v[t], 127 - e));
      p[1 + t / 2] |= static_cast<uint8_t>(t % 2 ? c << 4 : c);
    }
  }
}

void mxfp4_pack(const uint8_t* codes, const uint8_t* scales, void* dst, int64_t count) {
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < count; ++b, p += kMxfp4BlockBytes) {
    p[0] = scales[b];
    std::memcpy(p + 1, codes + b * static_cast<int64_t>(kMxfp4CodeBytes), kMxfp4CodeBytes);
  }
}

}  // namespace lathe
