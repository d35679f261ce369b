#include "core/dtype.h"

#include <cmath>

#include "core/error.h"
#include "core/fp8.h"
#include "core/mxfp4.h"
#include "core/quant.h"

namespace lathe {

DTypeTraits dtype_traits(DType t) {
  switch (t) {
    case DType::F32:
      return {1, 4};
    case DType::BF16:
      return {1, 2};
    case DType::F16:
      return {1, 2};
    case DType::I32:
      return {1, 4};
    case DType::Q8_0:
      return {32, 34};
    case DType::Q4_0:
      return {32, 18};
    case DType::MXFP4:
      return {kMxfp4Block, kMxfp4BlockBytes};
    case DType::FP8:
      return {kFp8Block, kFp8BlockBytes};
  }
  return {};
}

size_t row_bytes(DType t, int64_t n) {
  const DTypeTraits d = dtype_traits(t);
  if (n < 0 || n % d.block_size != 0)
    fail("internal: a row of ", n, " ", dtype_name(t), " elements is not whole blocks of ",
         d.block_size);
  return static_cast<size_t>(n / d.block_size) * d.block_bytes;
}

size_t dtype_size(DType t) {
  const DTypeTraits d = dtype_traits(t);
  if (d.block_size != 1) fail("internal: ", dtype_name(t), " has blocks, not element sizes");
  return d.block_bytes;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "F32";
    case DType::BF16:
      return "BF16";
    case DType::F16:
      return "F16";
    case DType::I32:
      return "I32";
    case DType::Q8_0:
      return "Q8_0";
    case DType::Q4_0:
      return "Q4_0";
    case DType::MXFP4:
      return "MXFP4";
    case DType::FP8:
      return "FP8";
  }
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  if (name == "F32") return DType::F32;
  if (name == "BF16") return DType::BF16;
  if (name == "F16") return DType::F16;
  if (name == "I32") return DType::I32;
  return std::nullopt;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  return std::bit_cast<float>(bits);
}

uint16_t f32_to_f16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // overflow to infinity
  if (abs < 0x38800000u) {  // subnormal or zero in f16: round |f| * 2^24 to an integer
    const float scaled = std::bit_cast<float>(abs) * 16777216.0f;
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  // Normal: drop 13 mantissa bits with round-to-nearest-even, rebias the exponent.
  uint32_t v = abs + 0xfffu + ((abs >> 13) & 1u);
  v -= (127u - 15u) << 23;
  return sign | static_cast<uint16_t>(v >> 13);
}

void convert_to_f32(DType from, const void* src, float* dst, size_t n) {
  switch (from) {
    case DType::F32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::BF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::F16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    case DType::I32: {
      const auto* s = static_cast<const int32_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
      return;
    }
    case DType::Q8_0:
    case DType::Q4_0:
      return dequantize(from, src, dst, static_cast<int64_t>(n));
    case DType::MXFP4:
      return mxfp4_dequantize(src, dst, static_cast<int64_t>(n));
    case DType::FP8:
      return fp8_dequantize(src, dst, static_cast<int64_t>(n));
  }
}

void convert_from_f32(DType to, const float* src, void* dst, size_t n) {
  switch (to) {
    case DType::F32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::BF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::F16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
      return;
    }
    case DType::I32:
      fail("internal: cannot convert f32 to I32 storage");
    case DType::Q8_0:
    case DType::Q4_0: {
      // Groups are independent: n values of whole rows quantize as one long row.
      return quantize_rows(to, src, dst, 1, static_cast<int64_t>(n));
    }
    case DType::MXFP4:
      return mxfp4_quantize(src, dst, static_cast<int64_t>(n));
    case DType::FP8:
      return fp8_quantize(src, dst, static_cast<int64_t>(n));
  }
}

}  // namespace lathe
