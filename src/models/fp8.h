// Block-scaled FP8 checkpoints (quantization_config quant_method "fp8", fmt "e4m3": DeepSeek V3,
// the Qwen3 -FP8 releases): a linear layer's weight [.., rows, cols] is stored as F8_E4M3
// codes (core/fp8.h) beside `<name>_scale_inv` [.., rows / block_rows, cols / block_cols], the
// factor each block's codes are multiplied by. lathe dequantizes them once at load, as
// transformers does on a machine without FP8 kernels (its Fp8Dequantize, the CPU path).
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

}  // namespace lathe
