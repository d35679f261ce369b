// Helpers for tests that read reference values from a JSON golden file.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "io/json.h"

namespace lathe::testing {

// A JSON list of numbers as floats (null: none).
inline std::vector<float> floats(const Json& j) {
  return j.is_null() ? std::vector<float>{} : j.get<std::vector<float>>();
}

// Largest |a - b| relative to the largest |b|; a size mismatch fails the test.
inline double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double err = 0, scale = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    err = std::max(err, std::abs(double{a[i]} - b[i]));
    scale = std::max(scale, std::abs(double{b[i]}));
  }
  return err / std::max(scale, 1e-30);
}

}  // namespace lathe::testing
