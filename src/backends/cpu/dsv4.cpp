#include "backends/cpu/dsv4.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/kernels.h"
#include "core/error.h"

namespace lathe::cpu {
namespace {

float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

}  // namespace

void hyper_mix(const float* mixes, const float* base, const float* scale, float* out, int64_t n,
               int64_t width, int64_t hc, int64_t iters, float eps) {
  const bool head = width == hc;
  for (int64_t t = 0; t < n; ++t) {
    const float* x = mixes + t * width;
    float* y = out + t * width;
    // pre = sigmoid(mix * s0 + b) + eps
    for (int64_t i = 0; i < hc; ++i) y[i] = sigmoid(x[i] * scale[0] + base[i]) + eps;
    if (head) continue;
    // post = 2 sigmoid(mix * s1 + b)
    for (int64_t i = hc; i < 2 * hc; ++i) y[i] = 2.0f * sigmoid(x[i] * scale[1] + base[i]);
    // comb[i][j] = softmax over j of (mix * s2 + b) + eps, held in y's last hc * hc values
    // untransposed while it is normalised.
    float* c = y + 2 * hc;
    for (int64_t i = 0; i < hc; ++i) {
      float* row = c + i * hc;
      float top = -INFINITY;
      for (int64_t j = 0; j < hc; ++j) {
        const int64_t at = 2 * hc + i * hc + j;
        row[j] = x[at] * scale[2] + base[at];
        top = std::max(top, row[j]);
      }
      float sum = 0.0f;
      for (int64_t j = 0; j < hc; ++j) sum += (row[j] = std::exp(row[j] - top));
      for (int64_t j = 0; j < hc; ++j) row[j] = row[j] / sum + eps;
    }
    auto by_columns = [&] {
      for (int64_t j = 0; j < hc; ++j) {
        float sum = 0.0f;
        for (int64_t i = 0; i < hc; ++i) sum += c[i * hc + j];
        for (int64_t i = 0; i < hc; ++i) c[i * hc + j] /= sum + eps;
      }
    };
    by_columns();
    for (int64_t k = 1; k < iters; ++k) {
      for (int64_t i = 0; i < hc; ++i) {
        float sum = 0.0f;
        for (int64_t j = 0; j < hc; ++j) sum += c[i * hc + j];
        for (int64_t j = 0; j < hc; ++j) c[i * hc + j] /= sum + eps;
      }
      by_columns();
    }
    for (int64_t i = 0; i < hc; ++i)
      for (int64_t j = i + 1; j < hc; ++j) std::swap(c[i * hc + j], c[j * hc + i]);
  }
}

size_t compress_scratch_floats(int64_t rot_dim) {
  return static_cast<size_t>(rot_dim);
}

void compress(const CompressArgs& a) {
  KVCache::Layer::Compressed& c = *a.cache;
  const int64_t rate = c.rate, ring = 2 * rate, width = a.width, dim = a.dim;
  const bool overlap = width == 2 * dim;
  if (c.recent.dim(0) != ring || c.recent.dim(1) != 2 * width || c.entries.dim(1) != dim ||
      a.ape_rows != rate)
    fail("internal: compress: cache rows ", shape_str(c.recent.shape()), " and entries ",
         shape_str(c.entries.shape()), " for ", width, " channels of ", dim, " and ", a.ape_rows,
         " position biases");
  float* recent = c.recent.mut<float>();
  const int64_t rot = a.rope->rot_dim(), half = rot / 2;
  float* cos = a.scratch;
  float* sin = cos + half;
  for (int64_t t = 0; t < a.tokens; ++t) {
    const int64_t pos = a.pos0 + t;
    // The row: kv, then gate + ape at the position's slot in its window.
    float* row = recent + (pos % ring) * 2 * width;
    std::memcpy(row, a.kv + t * width, static_cast<size_t>(width) * sizeof(float));
    const float* g = a.gate + t * width;
    const float* bias = a.ape + (pos % rate) * width;
    for (int64_t i = 0; i < width; ++i) row[width + i] = g[i] + bias[i];
    if ((pos + 1) % rate != 0) continue;
    // Window w closes: per channel, a softmax over its slots' gates weighs their kv. With
    // overlap the slots are the previous window's (channels [0, dim)) then this one's
    // (channels [dim, 2 dim)); window 0 has no previous one (its gates -inf: weight 0).
    const int64_t w = pos / rate;
    if (w >= c.entries.dim(0))
      fail("internal: compress: entry ", w, " past the cache's ", c.entries.dim(0));
    float* entry = c.entries.mut<float>() + w * dim;
    const int64_t first_prev = overlap && w > 0 ? (w - 1) * rate : -1;
    for (int64_t ch = 0; ch < dim; ++ch) {
      auto slot = [&](int64_t p) { return recent + (p % ring) * 2 * width; };
      const int64_t cur = overlap ? dim + ch : ch;
      float top = -INFINITY;
      for (int64_t j = 0; first_prev >= 0 && j < rate; ++j)
        top = std::max(top, slot(first_prev + j)[width + ch]);
      for (int64_t j = 0; j < rate; ++j) top = std::max(top, slot(w * rate + j)[width + cur]);
      float sum = 0.0f;
      for (int64_t j = 0; first_prev >= 0 && j < rate; ++j)
        sum += std::exp(slot(first_prev + j)[width + ch] - top);
      for (int64_t j = 0; j < rate; ++j) sum += std::exp(slot(w * rate + j)[width + cur] - top);
      float acc = 0.0f;
      for (int64_t j = 0; first_prev >= 0 && j < rate; ++j) {
        const float* r = slot(first_prev + j);
        acc += r[ch] * (std::exp(r[width + ch] - top) / sum);
      }
      for (int64_t j = 0; j < rate; ++j) {
        const float* r = slot(w * rate + j);
        acc += r[cur] * (std::exp(r[width + cur] - top) / sum);
      }
      entry[ch] = acc;
    }
    rms_norm(entry, a.norm, 0.0f, a.eps, entry, 1, dim);
    a.rope->fill(w * rate, 1, cos, sin, half);
    if (a.layout == graph::RopeLayout::Interleaved)
      rope_interleaved(entry + dim - rot, cos, sin, 1, 1, dim, rot);
    else
      rope_half_split(entry + dim - rot, cos, sin, 1, 1, dim, rot);
  }
}

}  // namespace lathe::cpu
