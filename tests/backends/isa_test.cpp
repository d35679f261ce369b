// The kernel level: chosen from the CPU, lowered by LATHE_CPU_ISA, never raised above it.
#include <gtest/gtest.h>

#include <cstdlib>

#include "backends/cpu/isa.h"
#include "core/error.h"

namespace lathe::cpu {
namespace {

TEST(Isa, NamesRoundTrip) {
  for (Isa isa : {Isa::Portable, Isa::Avx2, Isa::Avx512, Isa::Avx512Bf16})
    EXPECT_EQ(isa_from_name(isa_name(isa)), isa);
  EXPECT_FALSE(isa_from_name("sse9"));
}

TEST(Isa, DefaultIsTheBestButOptInBf16) {
  EXPECT_LE(static_cast<int>(default_isa()), static_cast<int>(detected_isa()));
  EXPECT_NE(default_isa(), Isa::Avx512Bf16);
  if (detected_isa() != Isa::Avx512Bf16) {
    EXPECT_EQ(default_isa(), detected_isa());
  }
}

TEST(Isa, CannotRiseAboveTheCpu) {
  const Isa saved = active_isa();
  for (int i = static_cast<int>(detected_isa()) + 1; i <= static_cast<int>(Isa::Avx512Bf16); ++i)
    EXPECT_THROW(set_active_isa(static_cast<Isa>(i)), Error);
  set_active_isa(Isa::Portable);
  EXPECT_EQ(active_isa(), Isa::Portable);
  set_active_isa(saved);
}

}  // namespace
}  // namespace lathe::cpu
