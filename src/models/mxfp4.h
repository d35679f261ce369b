// MXFP4 (the OCP microscaling format with FP4 E2M1 elements), as GptOss checkpoints publish
// their expert matrices (quantization_config quant_method "mxfp4"): each row of a matrix is cut
// into blocks of 32 values, stored as 16 bytes of two 4-bit E2M1 codes each (the low nibble
// the even value, the high nibble the odd one) and one E8M0 scale byte, the block's power of
// two plus 127. lathe repacks them once at load into DType::MXFP4 (core/mxfp4.h), which its
// MXFP4 kernels run, or dequantizes them, as transformers does when it runs such a checkpoint
// without its Triton kernels.
#pragma once

#include <cstdint>
#include <span>

#include "core/mxfp4.h"
#include "core/tensor.h"

namespace lathe {

// transformers integrations/mxfp4.py convert_moe_packed_tensors: value =
// torch.ldexp(FP4_VALUES[code], scale - 127) stored in `dtype` (F32 or BF16): exact, with
// subnormals at the bottom of the scale range and inf (zeros staying zeros) at 2^128.
// `blocks` holds numel(shape) / 2 bytes, `scales` numel(shape) / 32;
// the result has `shape` [.., rows, cols] (cols a multiple of 32), row-major: the layout
// transformers has before its final transpose(1, 2).
Tensor dequantize_mxfp4(std::span<const uint8_t> blocks, std::span<const uint8_t> scales,
                        const Shape& shape, DType dtype);

// The same blocks and scales repacked into DType::MXFP4 of `shape` (same layout rules), the
// values unchanged: convert_to_f32 of the result is dequantize_mxfp4's F32, bit for bit.
Tensor pack_mxfp4(std::span<const uint8_t> blocks, std::span<const uint8_t> scales,
                  const Shape& shape);

}  // namespace lathe
