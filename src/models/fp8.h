// Block-scaled FP8 checkpoints (quantization_config quant_method "fp8", fmt "e4m3": DeepSeek V3,
// the Qwen3 -FP8 releases): a linear layer's weight [.., rows, cols] is stored as F8_E4M3
// codes (core/fp8.h) beside `<name>_scale_inv` [.., rows / block_rows, cols / block_cols], the
// factor each block's codes are multiplied by. lathe repacks them once at load into DType::FP8
// (core/fp8.h), which its kernels run with each weight exactly the dequantized one, or
// dequantizes them, as transformers does on a machine without FP8 kernels (its Fp8Dequantize,
// the CPU path).
#pragma once

#include <cstdint>
#include <span>

#include "core/tensor.h"

namespace lathe {

// transformers integrations/finegrained_fp8.py Fp8Dequantize._dequantize_one: the block is
// the weight's shape over the scale grid's (rows % scale rows and cols % scale cols must be 0,
// which the caller checks); each value is f32(code) * f32(scale), then stored in `dtype`
// (F32, or BF16 rounded to nearest even). `codes` holds numel(shape) bytes; `scales` the
// grid's floats, [.., scale_rows, scale_cols].
Tensor dequantize_fp8(std::span<const uint8_t> codes, const Shape& shape,
                      std::span<const float> scales, int64_t scale_rows, int64_t scale_cols,
                      DType dtype);

// The same codes and scales repacked into DType::FP8 of `shape` (rows of 32-value blocks, each
// with its scale): convert_to_f32 of the result is dequantize_fp8's F32, bit for bit. Empty
// when the layout cannot hold them exactly: a block narrower than, or not a multiple of, 32
// columns, a NaN code, or a scale past fp8_block_exact's range; the caller dequantizes then.
Tensor pack_fp8(std::span<const uint8_t> codes, const Shape& shape, std::span<const float> scales,
                int64_t scale_rows, int64_t scale_cols);

}  // namespace lathe
