#include "backends/cpu/rowwise.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace lathe::cpu {

void row_stat(graph::RowStat stat, float eps, const float* x, float* y, int64_t rows, int64_t d) {
  const double count = static_cast<double>(d);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * d;
    switch (stat) {
      case graph::RowStat::Mean: {
        double sum = 0;
        for (int64_t i = 0; i < d; ++i) sum += xr[i];
        y[r] = static_cast<float>(sum / count);
        break;
      }
      case graph::RowStat::Std: {
        double sum = 0;
        for (int64_t i = 0; i < d; ++i) sum += xr[i];
        const double mean = sum / count;
        double squares = 0;
        for (int64_t i = 0; i < d; ++i) squares += (xr[i] - mean) * (xr[i] - mean);
        y[r] = static_cast<float>(std::sqrt(squares / count));
        break;
      }
      case graph::RowStat::Rms: {
        double squares = 0;
        for (int64_t i = 0; i < d; ++i) squares += static_cast<double>(xr[i]) * xr[i];
        y[r] = std::sqrt(std::max(static_cast<float>(squares / count), eps));
        break;
      }
    }
  }
}

namespace {

float apply(graph::BinaryOp op, float a, float b) {
  switch (op) {
    case graph::BinaryOp::Add:
      return a + b;
    case graph::BinaryOp::Sub:
      return a - b;
    case graph::BinaryOp::Mul:
      return a * b;
    case graph::BinaryOp::Div:
      return a / b;
  }
  return 0;
}

// Element strides of a tensor of `shape` broadcast to `out` (0 along a repeated dimension).
std::vector<int64_t> broadcast_strides(const Shape& shape, const Shape& out) {
  std::vector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    const size_t dim = shape.size() - 1 - i, o = out.size() - 1 - i;
    strides[o] = shape[dim] == 1 ? 0 : stride;
    stride *= shape[dim];
  }
  return strides;
}

}  // namespace

void binary(graph::BinaryOp op, const float* a, const Shape& a_shape, const float* b,
            const Shape& b_shape, float* out, const Shape& out_shape) {
  const int64_t numel = shape_numel(out_shape);
  if (numel == 0) return;
  if (a_shape == out_shape && b_shape == out_shape) {
    for (int64_t i = 0; i < numel; ++i) out[i] = apply(op, a[i], b[i]);
    return;
  }
  const std::vector<int64_t> sa = broadcast_strides(a_shape, out_shape);
  const std::vector<int64_t> sb = broadcast_strides(b_shape, out_shape);
  const size_t rank = out_shape.size();
  const int64_t inner = out_shape.back(), ia = sa.back(), ib = sb.back();
  std::vector<int64_t> index(rank, 0);
  for (int64_t row = 0; row < numel / inner; ++row) {
    int64_t oa = 0, ob = 0;
    for (size_t d = 0; d + 1 < rank; ++d) {
      oa += index[d] * sa[d];
      ob += index[d] * sb[d];
    }
    float* o = out + row * inner;
    for (int64_t i = 0; i < inner; ++i) o[i] = apply(op, a[oa + i * ia], b[ob + i * ib]);
    for (size_t d = rank - 1; d-- > 0;) {  // the next row's index, last dimension excluded
      if (++index[d] < out_shape[d]) break;
      index[d] = 0;
    }
  }
}

void batch_matmul(const float* a, const float* b, float* out, int64_t n, int64_t m, int64_t k,
                  int64_t d) {
  for (int64_t t = 0; t < n; ++t) {
    const float* at = a + t * m * k;
    const float* bt = b + t * k * d;
    float* ot = out + t * m * d;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < d; ++j) {
        float sum = 0;
        for (int64_t p = 0; p < k; ++p) sum += at[i * k + p] * bt[p * d + j];
        ot[i * d + j] = sum;
      }
  }
}

}  // namespace lathe::cpu
