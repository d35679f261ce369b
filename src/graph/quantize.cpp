#include "graph/quantize.h"

#include <string>
#include <vector>

#include "core/error.h"
#include "core/pages.h"
#include "core/quant.h"

namespace lathe::graph {

WeightQuantizer::WeightQuantizer(DType type) : type_(type) {
  if (!is_quantized(type)) fail("internal: WeightQuantizer to ", dtype_name(type));
}

bool WeightQuantizer::applies(const Tensor& w) const {
  return (w.dtype() == DType::F32 || w.dtype() == DType::BF16) && w.rank() == 2 && w.dim(1) > 0 &&
         w.dim(1) % kQuantGroup == 0;
}

namespace {

Tensor quantize_matrix(DType type, const Tensor& w) {
  const int64_t rows = w.dim(0), k = w.dim(1);
  Tensor q = Tensor::zeros(type, w.shape());
  std::vector<float> row(static_cast<size_t>(k));
  const size_t in_row = w.nbytes() / static_cast<size_t>(rows), out_row = row_bytes(type, k);
  for (int64_t r = 0; r < rows; ++r) {
    convert_to_f32(w.dtype(), w.data<uint8_t>() + static_cast<size_t>(r) * in_row, row.data(),
                   static_cast<size_t>(k));
    quantize_rows(type, row.data(), q.mut<uint8_t>() + static_cast<size_t>(r) * out_row, 1, k);
  }
  return q;
}

}  // namespace

Tensor WeightQuantizer::get(const Tensor& w) {
  const std::pair<const void*, int64_t> key{w.data<void>(), w.dim(0)};
  std::lock_guard<std::mutex> lock(mu_);
  if (!applies(w)) {
    if (kept_.emplace(key, true).second) ++stats_.kept;
    return w;
  }
  if (auto it = done_.find(key); it != done_.end()) return it->second;
  Tensor q = quantize_matrix(type_, w);
  if (!w.owned()) page_out(w.data<void>(), w.nbytes());
  ++stats_.matrices;
  stats_.source_bytes += w.nbytes();
  stats_.quantized_bytes += q.nbytes();
  done_.emplace(key, q);
  return q;
}

Tensor WeightQuantizer::take(Tensor w) {
  if (!applies(w)) return w;
  Tensor q = quantize_matrix(type_, w);
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.matrices;
  stats_.source_bytes += w.nbytes();
  stats_.quantized_bytes += q.nbytes();
  return q;
}

WeightQuantizer::Stats WeightQuantizer::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace lathe::graph
