// Numeric comparison of a run against the reference (transformers): the figures every
// golden test and lab row reports.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/numeric.h"
#include "core/tensor.h"

namespace lathe {

struct LogitComparison {
  double max_abs_error = 0;
  double nmse = 0;            // sum (a - b)^2 / sum b^2, b the reference
  double top1_agreement = 0;  // share of rows whose argmax agrees
  int64_t rows = 0;
  std::optional<int64_t> first_top1_mismatch;  // first row whose argmax differs
};

// `actual` and `reference` are [rows, vocab] F32 with equal shapes.
LogitComparison compare_logits(const Tensor& actual, const Tensor& reference);

// The first row of [rows, vocab] logits whose own NMSE exceeds `threshold` or is NaN: decode
// steps are judged one at a time, so a cache fault is named by the first step that reads it.
std::optional<int64_t> first_row_past(const Tensor& actual, const Tensor& reference,
                                      double threshold);

// The first position where two token sequences differ (length of the shorter when one is
// a prefix of the other and lengths differ); nullopt when identical.
std::optional<int64_t> first_token_mismatch(std::span<const int32_t> actual,
                                            std::span<const int32_t> reference);

struct LayerComparison {
  std::string name;
  double nmse = 0;
  double max_abs_error = 0;
};
// Compares each reference intermediate, in the reference's order, with lathe's of the same
// name; `first_diverging` is the first whose NMSE exceeds `threshold` or is NaN. A reference
// name lathe did not trace, or a size mismatch, is an error naming the layer.
struct LayerReport {
  std::vector<LayerComparison> layers;
  std::optional<std::string> first_diverging;
};
LayerReport compare_layers(const std::vector<std::pair<std::string, Tensor>>& actual,
                           const std::vector<std::pair<std::string, Tensor>>& reference,
                           double threshold);

}  // namespace lathe
