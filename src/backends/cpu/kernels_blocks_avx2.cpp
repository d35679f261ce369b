// The block-type matmuls (block_kernels.h) with AVX2 + FMA + F16C: compiled with those -m flags
// (CMakeLists.txt), run when cpu::active_isa() is Avx2. One body (block_kernels.inc) per type,
// each with its own block decode:
//  - MXFP4: a block's 32 nibbles are put in order (low nibble the even value) and looked up by
//    vpshufb in a table of twice each code's value (integers -12..12), widened to f32 and
//    multiplied by the block's 2^(e - 128): exact;
//  - FP8: a block's 32 E4M3 codes become 32 f16s worth 2^-8 of their values, vcvtph2ps widens
//    each 8 of them, and one multiplication by the block's scale times 2^8 gives each weight
//    exactly.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backends/cpu/block_kernels.h"

namespace lathe::cpu::avx2 {
namespace {

struct V {
  using R = __m256;
  static constexpr int kLanes = 8;
  static R zero() { return _mm256_setzero_ps(); }
  static R load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, R v) { _mm256_storeu_ps(p, v); }
  static R fma(R a, R b, R acc) { return _mm256_fmadd_ps(a, b, acc); }
  static float sum(R v) {
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
  }
};

// 4 x rows by 3 weight rows as the f32 tiles (kernels_avx2.cpp); 8 rows for one x row.
constexpr int kTileRows = 4, kTileCols = 3, kRowCols = 8;

}  // namespace

namespace mxfp4 {
namespace {

constexpr size_t kBlockBytes = 17;

// 2^(e - 128) (core/mxfp4.h's mxfp4_half_scale, here as its own copy: isa_kernels.h).
inline float half_scale(uint8_t e) {
  const uint32_t bits = e >= 2 ? static_cast<uint32_t>(e - 1) << 23 : 0x00200000u << e;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline void decode(const uint8_t* block, __m256* out) {
  const __m128i table = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 1));
  const __m128i nibble = _mm_set1_epi8(0x0f);
  const __m128i lo = _mm_and_si128(b, nibble), hi = _mm_and_si128(_mm_srli_epi16(b, 4), nibble);
  const __m128i v0 = _mm_shuffle_epi8(table, _mm_unpacklo_epi8(lo, hi));  // values 0..15
  const __m128i v1 = _mm_shuffle_epi8(table, _mm_unpackhi_epi8(lo, hi));  // values 16..31
  const __m256 s = _mm256_set1_ps(half_scale(block[0]));
  const __m128i parts[4] = {v0, _mm_unpackhi_epi64(v0, v0), v1, _mm_unpackhi_epi64(v1, v1)};
  for (int r = 0; r < 4; ++r)
    out[r] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(parts[r])), s);
}

}  // namespace

#include "backends/cpu/block_kernels.inc"

}  // namespace mxfp4

namespace fp8 {
namespace {

constexpr size_t kBlockBytes = 36;

// 8 codes, sign-extended to 16 bits, as f16 bits (as kernels_blocks_avx512.cpp's).
inline __m256 codes_as_f32(__m128i c) {
  return _mm256_cvtph_ps(_mm_and_si128(_mm_slli_epi16(c, 7), _mm_set1_epi16(-16385)));
}

inline void decode(const uint8_t* block, __m256* out) {
  float scale;
  std::memcpy(&scale, block, 4);
  const __m256 s = _mm256_set1_ps(scale * 256.0f);
  const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 4));
  const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 20));
  const __m128i parts[4] = {lo, _mm_unpackhi_epi64(lo, lo), hi, _mm_unpackhi_epi64(hi, hi)};
  for (int r = 0; r < 4; ++r) out[r] = _mm256_mul_ps(codes_as_f32(_mm_cvtepi8_epi16(parts[r])), s);
}

}  // namespace

#include "backends/cpu/block_kernels.inc"

}  // namespace fp8
}  // namespace lathe::cpu::avx2
