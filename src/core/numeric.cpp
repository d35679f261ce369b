#include "core/numeric.h"

#include <cmath>

#include "core/error.h"

namespace lathe {

double nmse(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size()) fail("internal: nmse of arrays of ", a.size(), " and ", b.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += static_cast<double>(b[i]) * b[i];
  }
  if (den == 0) return num == 0 ? 0 : INFINITY;
  return num / den;
}

double max_abs_error(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size())
    fail("internal: max_abs_error of arrays of ", a.size(), " and ", b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    if (std::isnan(d)) return NAN;
    if (d > worst) worst = d;
  }
  return worst;
}

}  // namespace lathe
