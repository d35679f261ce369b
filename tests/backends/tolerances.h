// How far a backend's output may be from the reference backend's, per op and dtype: the one
// table the op test bench (op_test.cpp) checks every case against.
//
// How the values were chosen: `LATHE_OP_BENCH_REPORT=1 op_tests` prints each fast kernel
// level's NMSE and max abs error for every case; a tolerance is the worst figure over the
// bench's shape classes and levels with 10-100x headroom. Inputs are uniform in (-1, 1), so
// max abs error is in units of the inputs' scale. Worst observed (Xeon with AVX-512 and
// AVX512-BF16, every level it runs: portable, avx2, avx512, avx512bf16):
//  - Linear: the fast kernels sum in lanes of 8 or 16 (fused multiply-adds from AVX2 up)
//    where the reference sums one by one.
//      F32:  NMSE 2.7e-13, max abs 1.7e-5 (2 x 64 x 576, portable and avx2 alike)
//      BF16: NMSE 2.0e-13, max abs 1.5e-5 (2 x 64 x 576), weights widened to f32 exactly
//    so NMSE 1e-11 (37x) and max abs 2e-4 (12x). On avx512bf16, BF16 weights meet
//    activations rounded to bf16 (vdpbf16ps): NMSE 3.9e-6, max abs 3.1e-2 (3x2x24 . 10 and
//    2 x 64 x 576), so kLinearBf16Activations is NMSE 5e-5 (13x), max abs 0.3 (10x).
//    MXFP4 weights (f32 activations times the exactly dequantized weights, in the f32 tiles'
//    lanes): NMSE 1.1e-12, max abs 9.5e-5 (1 x 200 x 2880, gpt-oss's k, on avx2; outputs of
//    magnitude ~30), within Linear's tolerances (9x, 2x); the portable level is the reference.
//    FP8 weights (the same kernel body, each E4M3 code widened through f16 and scaled
//    exactly): NMSE 1.0e-12, max abs 1.2e-4 (1 x 200 x 2880 on avx512), within Linear's
//    (10x, 1.6x).
//  - Attention: from AVX2 up, vector scores (fused multiply-adds over the head dimension),
//    a polynomial exp and vector softmax sums: NMSE 7.5e-14, max abs 1.5e-7 (worst case over
//    the attention cases), so NMSE 1e-12 (13x), max abs 1e-5 (67x). The portable level
//    computes each row as the reference does: 0. Over a bf16 KV cache (the BF16 row: every
//    attention case again, the reference kernel reading the same bf16 keys and values, both
//    widened exactly): NMSE 3.4e-14, max abs 1.8e-7 (avx512, attention_bf16kv_large and
//    _chunk13_large; avx2 3.3e-14, 1.5e-7), so the f32 row's 1e-12 (30x) and 1e-5 (56x).
//  - Linear with Q8_0 and Q4_0 weights: every level's quantized kernel against the reference
//    one, which quantizes the activations alike, so only the f32 sums' order differs: NMSE
//    3.6e-14, max abs 2.3e-5 (the Experts cases 9 x 64 x 128), within Linear's tolerances.
//  - Experts and HeadLinear run the Linear kernels on each expert's (head's) rows: Linear's
//    tolerances.
//  - RmsNorm: from AVX2 up the squares are summed in vector lanes: NMSE 4.8e-14, max abs
//    1.2e-6 (rms_norm_offset0_1x64; _offset1_37x300, inputs of scale 3), so NMSE 1e-12 (21x)
//    and max abs 1e-5 (8x).
//  - ActMul: from AVX2 up SiLU and tanh GELU are g / (1 + e^z) over the attention's
//    polynomial e^x: NMSE 3.0e-15, max abs 4.8e-7 (act_mul_gelu_tanh_37x300), so NMSE 1e-13
//    (33x) and max abs 1e-5 (21x); the other activations are the reference's, bit for bit.
//  - Every other op runs the same kernel on both CPU backends: 0, bit for bit (the gated
//    delta rule splits heads across threads, each head computed as the reference does).
#pragma once

#include <optional>

#include "backends/cpu/isa.h"
#include "core/dtype.h"
#include "graph/graph.h"

namespace lathe::optest {

struct Tolerance {
  double nmse = 0;     // sum (a - b)^2 / sum b^2 over the output
  double max_abs = 0;  // max |a - b|
  // Both 0: the backend must reproduce the reference bit for bit.
  bool exact() const { return nmse == 0 && max_abs == 0; }
};

struct ToleranceRow {
  graph::Op op;
  DType dtype;  // the weight's (Linear) or the table's (Embedding) dtype; F32 for the rest
  Tolerance tol;
};

inline constexpr ToleranceRow kTolerances[] = {
    {graph::Op::Embedding, DType::F32, {}},
    {graph::Op::Embedding, DType::BF16, {}},
    {graph::Op::Embedding, DType::F16, {}},
    {graph::Op::Embedding, DType::Q8_0, {}},
    {graph::Op::Embedding, DType::Q4_0, {}},
    {graph::Op::Linear, DType::F32, {1e-11, 2e-4}},
    {graph::Op::Linear, DType::BF16, {1e-11, 2e-4}},
    {graph::Op::Linear, DType::Q8_0, {1e-11, 2e-4}},
    {graph::Op::Linear, DType::Q4_0, {1e-11, 2e-4}},
    {graph::Op::Linear, DType::MXFP4, {1e-11, 2e-4}},
    {graph::Op::Linear, DType::FP8, {1e-11, 2e-4}},
    {graph::Op::RmsNorm, DType::F32, {1e-12, 1e-5}},
    {graph::Op::LayerNorm, DType::F32, {}},
    {graph::Op::ActMul, DType::F32, {1e-13, 1e-5}},
    {graph::Op::Activation, DType::F32, {}},
    {graph::Op::Add, DType::F32, {}},
    {graph::Op::Scale, DType::F32, {}},
    {graph::Op::Divide, DType::F32, {}},
    {graph::Op::Softcap, DType::F32, {}},
    {graph::Op::Clamp, DType::F32, {}},
    {graph::Op::Xielu, DType::F32, {}},
    {graph::Op::Reshape, DType::F32, {}},
    {graph::Op::RopeTables, DType::F32, {}},
    {graph::Op::Rope, DType::F32, {}},
    {graph::Op::Attention, DType::F32, {1e-12, 1e-5}},
    {graph::Op::Attention, DType::BF16, {1e-12, 1e-5}},  // over a bf16 KV cache
    {graph::Op::Rows, DType::F32, {}},
    {graph::Op::Route, DType::F32, {}},
    {graph::Op::Experts, DType::F32, {1e-11, 2e-4}},
    {graph::Op::Experts, DType::BF16, {1e-11, 2e-4}},
    {graph::Op::Experts, DType::Q8_0, {1e-11, 2e-4}},
    {graph::Op::Experts, DType::Q4_0, {1e-11, 2e-4}},
    {graph::Op::Experts, DType::MXFP4, {1e-11, 2e-4}},
    {graph::Op::Experts, DType::FP8, {1e-11, 2e-4}},
    {graph::Op::Concat, DType::F32, {}},
    {graph::Op::HeadLinear, DType::F32, {1e-11, 2e-4}},
    {graph::Op::HeadLinear, DType::BF16, {1e-11, 2e-4}},
    {graph::Op::Slice, DType::F32, {}},
    {graph::Op::CausalConv, DType::F32, {}},
    {graph::Op::GatedDeltaRule, DType::F32, {}},
    {graph::Op::Ssd, DType::F32, {}},
    {graph::Op::RowStat, DType::F32, {}},
    {graph::Op::Binary, DType::F32, {}},
    {graph::Op::BatchMatmul, DType::F32, {}},
    {graph::Op::Indexer, DType::F32, {}},  // one kernel for every backend: the same keys
};

// Linear with BF16 weights on Avx512Bf16: activations rounded to bf16 first.
inline constexpr Tolerance kLinearBf16Activations = {5e-5, 3e-1};

inline std::optional<Tolerance> tolerance(graph::Op op, DType dtype, cpu::Isa isa) {
  if ((op == graph::Op::Linear || op == graph::Op::Experts || op == graph::Op::HeadLinear) &&
      dtype == DType::BF16 && isa == cpu::Isa::Avx512Bf16)
    return kLinearBf16Activations;
  for (const ToleranceRow& r : kTolerances)
    if (r.op == op && r.dtype == dtype) return r.tol;
  return std::nullopt;
}

}  // namespace lathe::optest
