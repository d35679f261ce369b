// Which instruction set the fast CPU kernels use, chosen at run time from the CPU's features,
// so that one build serves every x86-64 machine:
//   Avx512Bf16  AVX-512 (F, BW, VL) with FMA and AVX512-BF16 (vdpbf16ps)
//   Avx512      AVX-512 (F, BW, VL) with FMA
//   Avx2        AVX2 with FMA
//   Portable    baseline x86-64 (or any other CPU): GCC vector extensions, no FMA
// The default is the best level but Avx512Bf16, which is opt-in: on the one machine measured
// (docs/performance.md) its bf16 dot products were no faster than AVX-512 widening bf16
// weights to f32, and they round activations to bf16. LATHE_CPU_ISA=portable|avx2|avx512|
// avx512bf16 chooses a level (comparing kernels on one machine); asking for more than the CPU
// has is an error.
// The reference backend never depends on this: its kernels are plain loops.
#pragma once

#include <optional>
#include <string_view>

namespace lathe::cpu {

enum class Isa { Portable, Avx2, Avx512, Avx512Bf16 };

const char* isa_name(Isa isa);
std::optional<Isa> isa_from_name(std::string_view name);

// The best level this CPU (and its operating system) supports.
Isa detected_isa();
// The level used when LATHE_CPU_ISA is not set.
Isa default_isa();
// The level the fast kernels use: LATHE_CPU_ISA, if set, else default_isa(). Throws
// lathe::Error when LATHE_CPU_ISA names an unknown level or one above detected_isa().
Isa active_isa();
// Sets the level for the rest of the process (tests that compare levels); at most
// detected_isa(). Not to be called while kernels run.
void set_active_isa(Isa isa);

}  // namespace lathe::cpu
