#include "lab/compare.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace lathe {

LogitComparison compare_logits(const Tensor& actual, const Tensor& reference) {
  if (actual.shape() != reference.shape() || actual.rank() != 2 || actual.dtype() != DType::F32 ||
      reference.dtype() != DType::F32)
    fail("cannot compare logits ", shape_str(actual.shape()), " with reference ",
         shape_str(reference.shape()));
  LogitComparison c;
  c.rows = actual.dim(0);
  const int64_t vocab = actual.dim(1);
  const float* a = actual.data<float>();
  const float* b = reference.data<float>();
  int64_t agree = 0;
  for (int64_t r = 0; r < c.rows; ++r) {
    const float* ar = a + r * vocab;
    const float* br = b + r * vocab;
    // NaN stays NaN (std::max would drop it): a row of NaNs must not read as agreement.
    const double row_error =
        max_abs_error({ar, static_cast<size_t>(vocab)}, {br, static_cast<size_t>(vocab)});
    if (!std::isnan(c.max_abs_error) && (std::isnan(row_error) || row_error > c.max_abs_error))
      c.max_abs_error = row_error;
    const bool same =
        std::max_element(ar, ar + vocab) - ar == std::max_element(br, br + vocab) - br;
    agree += same;
    if (!same && !c.first_top1_mismatch) c.first_top1_mismatch = r;
  }
  c.nmse = nmse({a, static_cast<size_t>(actual.numel())}, {b, static_cast<size_t>(actual.numel())});
  c.top1_agreement = c.rows ? static_cast<double>(agree) / static_cast<double>(c.rows) : 1.0;
  return c;
}

std::optional<int64_t> first_row_past(const Tensor& actual, const Tensor& reference,
                                      double threshold) {
  compare_logits(actual, reference);  // checks the shapes and dtypes
  const int64_t vocab = actual.dim(1);
  for (int64_t r = 0; r < actual.dim(0); ++r) {
    const double e = nmse({actual.data<float>() + r * vocab, static_cast<size_t>(vocab)},
                          {reference.data<float>() + r * vocab, static_cast<size_t>(vocab)});
    if (!(e <= threshold)) return r;
  }
  return std::nullopt;
}

std::optional<int64_t> first_token_mismatch(std::span<const int32_t> a,
                                            std::span<const int32_t> b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return static_cast<int64_t>(i);
  if (a.size() != b.size()) return static_cast<int64_t>(n);
  return std::nullopt;
}

LayerReport compare_layers(const std::vector<std::pair<std::string, Tensor>>& actual,
                           const std::vector<std::pair<std::string, Tensor>>& reference,
                           double threshold) {
  LayerReport report;
  for (const auto& [name, ref] : reference) {
    // Compared through a plain reference: clang before 16 cannot capture a structured binding.
    const std::string& wanted = name;
    auto it = std::find_if(actual.begin(), actual.end(),
                           [&](const auto& p) { return p.first == wanted; });
    // A reference state lathe did not produce is a broken comparison, never a silent pass.
    if (it == actual.end())
      fail("layer ", name, " of the reference has no counterpart among the ", actual.size(),
           " intermediates lathe traced");
    const Tensor& act = it->second;
    if (act.numel() != ref.numel())
      fail("layer ", name, ": ", shape_str(act.shape()), " vs reference ", shape_str(ref.shape()));
    LayerComparison lc{name, 0, 0};
    const size_t n = static_cast<size_t>(ref.numel());
    lc.nmse = nmse({act.data<float>(), n}, {ref.data<float>(), n});
    lc.max_abs_error = max_abs_error({act.data<float>(), n}, {ref.data<float>(), n});
    // NaN fails the comparison.
    if (!(lc.nmse <= threshold) && !report.first_diverging) report.first_diverging = name;
    report.layers.push_back(lc);
  }
  return report;
}

}  // namespace lathe
