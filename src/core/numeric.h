// Numeric comparison of two arrays: the figures golden tests, the lab and the op test bench
// report when a run is checked against a reference.
#pragma once

#include <span>

namespace lathe {

// Normalised mean squared error of two equal-length arrays, reference in the denominator:
// sum (a - b)^2 / sum b^2. 0 when both are all zeros; infinite when only the reference is.
double nmse(std::span<const float> actual, std::span<const float> reference);

// max |a - b| over two equal-length arrays (0 when empty). Equal values (infinities
// included) differ by 0; any NaN difference makes the result NaN.
double max_abs_error(std::span<const float> actual, std::span<const float> reference);

}  // namespace lathe
