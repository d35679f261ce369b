// Weights quantized once for the matmuls that use them (`--quantize q8_0|q4_0`): the Builder
// asks this for each Linear and Experts weight as it builds a graph, and the model keeps it,
// so every step graph of the model shares the one quantized copy of each matrix.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

#include "core/tensor.h"

namespace lathe::graph {

class WeightQuantizer {
 public:
  explicit WeightQuantizer(DType type);
  DType type() const { return type_; }

  // Whether w is quantized: an F32 or BF16 matrix whose rows are whole groups of 64 values
  // (core/quant.h). Others (odd widths, f16 scratch, vectors) keep their dtype.
  bool applies(const Tensor& w) const;
  // The quantized copy of w, made at the first request and the same tensor afterwards. A
  // source that is a view of a mapped checkpoint has its pages given back afterwards
  // (MADV_DONTNEED on its private file mapping: re-read from the file if used again).
  Tensor get(const Tensor& w);
  // The quantized copy of an owned tensor the caller gives up (a rank's slice): made each
  // call, not kept here; w is returned as it is when applies() is false.
  Tensor take(Tensor w);

  struct Stats {
    int64_t matrices = 0;       // quantized
    uint64_t source_bytes = 0;  // of those matrices before
    uint64_t quantized_bytes = 0;
    int64_t kept = 0;  // matrices asked for that keep their dtype (applies() false)
  };
  Stats stats() const;

 private:
  DType type_;
  mutable std::mutex mu_;
  // By the source's data and row count (a row block of a fused weight shares its data).
  std::map<std::pair<const void*, int64_t>, Tensor> done_;
  Stats stats_;
  std::map<std::pair<const void*, int64_t>, bool> kept_;
};

}  // namespace lathe::graph
