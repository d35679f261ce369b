#include "backends/cpu/isa.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

#include <atomic>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace lathe::cpu {
namespace {

constexpr const char* kNames[] = {"portable", "avx2", "avx512", "avx512bf16"};

Isa detect() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  // __builtin_cpu_supports also checks that the OS saves the vector state (XCR0).
  // F16C (vcvtph2ps, which the FP8 kernels use) comes with every AVX2 CPU; checked anyway,
  // through CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports does not know it.
  unsigned a = 0, b = 0, c = 0, d = 0;
  const bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  if (avx512 && __builtin_cpu_supports("avx512bf16")) return Isa::Avx512Bf16;
  if (avx512) return Isa::Avx512;
  if (avx2) return Isa::Avx2;
#endif
  return Isa::Portable;
}

Isa from_environment() {
  const Isa best = detected_isa();
  const char* env = std::getenv("LATHE_CPU_ISA");
  if (!env || !*env) return default_isa();
  const std::optional<Isa> want = isa_from_name(env);
  if (!want)
    fail("LATHE_CPU_ISA=", env, " is not a kernel level (portable, avx2, avx512, avx512bf16)");
  if (static_cast<int>(*want) > static_cast<int>(best))
    fail("LATHE_CPU_ISA=", env, " asks for more than this CPU has (", isa_name(best), ")");
  return *want;
}

// -1: not chosen yet.
std::atomic<int> g_active{-1};

}  // namespace

const char* isa_name(Isa isa) {
  return kNames[static_cast<int>(isa)];
}

std::optional<Isa> isa_from_name(std::string_view name) {
  for (int i = 0; i < 4; ++i)
    if (name == kNames[i]) return static_cast<Isa>(i);
  return std::nullopt;
}

Isa default_isa() {
  // Avx512Bf16 only differs in its bf16 matmul (vdpbf16ps on bf16-rounded activations), which
  // measured no faster than widening bf16 weights to f32 (docs/performance.md): opt-in.
  return detected_isa() == Isa::Avx512Bf16 ? Isa::Avx512 : detected_isa();
}

Isa detected_isa() {
  static const Isa isa = detect();
  return isa;
}

Isa active_isa() {
  int v = g_active.load(std::memory_order_relaxed);
  if (v < 0) {
    v = static_cast<int>(from_environment());
    g_active.store(v, std::memory_order_relaxed);
  }
  return static_cast<Isa>(v);
}

void set_active_isa(Isa isa) {
  if (static_cast<int>(isa) > static_cast<int>(detected_isa()))
    fail("kernel level ", isa_name(isa), " is above this CPU's (", isa_name(detected_isa()), ")");
  g_active.store(static_cast<int>(isa), std::memory_order_relaxed);
}

}  // namespace lathe::cpu
