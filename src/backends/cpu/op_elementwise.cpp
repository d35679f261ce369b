// The CPU backends' element-wise and row-wise ops (ops.h): norms, activations, arithmetic,
// row statistics, broadcasting binary ops and DeepseekV4's hyper-connection mixing.
#include <algorithm>
#include <cstring>

#include "backends/cpu/dsv4.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/ops.h"
#include "backends/cpu/rowwise.h"

namespace lathe::cpu {
namespace {

using graph::Op;

// Runs fn(r0, r1) over `rows` rows of `row_floats` each: on the pool in tasks of at least
// kMinTaskFloats when `parallel`, else at once. The ops split so compute each row (or
// element) as one call would: the bits do not depend on the split.
constexpr int64_t kMinTaskFloats = 16384;

template <class F>
void over_rows(bool parallel, ThreadPool& pool, int64_t rows, int64_t row_floats, const F& fn) {
  if (!parallel || rows * row_floats < 2 * kMinTaskFloats) return fn(int64_t{0}, rows);
  pool.parallel_for(rows, std::max<int64_t>(1, kMinTaskFloats / std::max<int64_t>(row_floats, 1)),
                    fn);
}

template <bool kFast>
void run_rms_norm(const NodeArgs& a) {
  const graph::Node& n = a.node;
  const Tensor* x = a.inputs[0];
  const int64_t numel = a.out.numel();
  const auto& p = n.attr<graph::RmsNormAttrs>();
  const int64_t dim = x->dim(-1), groups = a.inputs[1]->numel() / dim;
  const float* w = a.inputs[1]->data<float>();
  auto norm = kFast ? rms_norm_fast : rms_norm;
  over_rows(kFast, a.pool, numel / dim, dim, [&](int64_t r0, int64_t r1) {
    if (groups == 1)
      return norm(x->data<float>() + r0 * dim, w, p.offset, p.eps, a.out.mut<float>() + r0 * dim,
                  r1 - r0, dim);
    for (int64_t r = r0; r < r1; ++r)  // row r reads weight row r % groups
      norm(x->data<float>() + r * dim, w + (r % groups) * dim, p.offset, p.eps,
           a.out.mut<float>() + r * dim, 1, dim);
  });
}

void run_layer_norm(const NodeArgs& a) {
  const graph::Node& n = a.node;
  const Tensor* x = a.inputs[0];
  const int64_t numel = a.out.numel();
  const int64_t dim = x->dim(-1);
  const Tensor* w = a.inputs[1];
  const Tensor* b = a.inputs[2];
  const int64_t groups = std::max(w ? w->numel() / dim : 1, b ? b->numel() / dim : 1);
  layer_norm(x->data<float>(), f32_or_null(w), f32_or_null(b), groups,
             n.attr<graph::LayerNormAttrs>().eps, a.out.mut<float>(), numel / dim, dim);
}

template <bool kFast>
void run_act_mul(const NodeArgs& a) {
  const graph::Node& n = a.node;
  const Tensor* x = a.inputs[0];
  const int64_t numel = a.out.numel();
  const graph::Activation act = n.attr<graph::ActAttrs>().act;
  if (x->numel() != numel) {  // one gate value per row
    const int64_t dim = a.out.dim(-1);
    const float* up = a.inputs[1]->data<float>();
    float* o = a.out.mut<float>();
    for (int64_t r = 0; r < numel / dim; ++r) {
      float g;
      activation(act, x->data<float>() + r, &g, 1);
      for (int64_t i = 0; i < dim; ++i) o[r * dim + i] = g * up[r * dim + i];
    }
    return;
  }
  auto kernel = kFast ? act_mul_fast : act_mul;
  over_rows(kFast, a.pool, numel, 1, [&](int64_t i0, int64_t i1) {
    kernel(act, x->data<float>() + i0, a.inputs[1]->data<float>() + i0, a.out.mut<float>() + i0,
           i1 - i0);
  });
}

template <bool kFast>
void run_activation(const NodeArgs& a) {
  const graph::Node& n = a.node;
  const Tensor* x = a.inputs[0];
  const int64_t numel = a.out.numel();
  over_rows(kFast, a.pool, numel, 1, [&](int64_t i0, int64_t i1) {
    activation(n.attr<graph::ActAttrs>().act, x->data<float>() + i0, a.out.mut<float>() + i0,
               i1 - i0);
  });
}

template <bool kFast>
void run_add(const NodeArgs& a) {
  const Tensor* x = a.inputs[0];
  const int64_t numel = a.out.numel();
  const float *pa = x->data<float>(), *pb = a.inputs[1]->data<float>();
  float* o = a.out.mut<float>();
  over_rows(kFast, a.pool, numel, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) o[i] = pa[i] + pb[i];
  });
}

// out[i] = f(x[i]) over the node's output.
template <class F>
void map(const NodeArgs& a, const F& f) {
  const float* x = a.inputs[0]->data<float>();
  float* o = a.out.mut<float>();
  for (int64_t i = 0, n = a.out.numel(); i < n; ++i) o[i] = f(x[i]);
}

void run_scale(const NodeArgs& a) {
  const float s = a.node.attr<graph::ScaleAttrs>().value;
  map(a, [s](float v) { return v * s; });
}

void run_divide(const NodeArgs& a) {
  const float s = a.node.attr<graph::ScaleAttrs>().value;
  map(a, [s](float v) { return v / s; });
}

void run_softcap(const NodeArgs& a) {
  std::memcpy(a.out.mut<float>(), a.inputs[0]->data<float>(), a.out.nbytes());
  softcap(a.out.mut<float>(), a.out.numel(), a.node.attr<graph::SoftcapAttrs>().cap);
}

void run_clamp(const NodeArgs& a) {
  const auto& p = a.node.attr<graph::ClampAttrs>();
  const float lim = p.limit;
  if (p.upper_only)
    map(a, [lim](float v) { return std::min(v, lim); });
  else
    map(a, [lim](float v) { return std::clamp(v, -lim, lim); });
}

void run_xielu(const NodeArgs& a) {
  const graph::Node& n = a.node;
  const Tensor* x = a.inputs[0];
  const int64_t numel = a.out.numel();
  const auto& c = n.attr<graph::XieluAttrs>();
  xielu(x->data<float>(), a.out.mut<float>(), numel, c.alpha_p, c.alpha_n, c.beta, c.eps);
}

void run_row_stat(const NodeArgs& a) {
  const graph::Node& n = a.node;
  const Tensor* x = a.inputs[0];
  const int64_t numel = a.out.numel();
  row_stat(n.attr<graph::RowStatAttrs>().stat, n.attr<graph::RowStatAttrs>().eps, x->data<float>(),
           a.out.mut<float>(), numel, x->dim(-1));
}

void run_binary(const NodeArgs& a) {
  const graph::Node& n = a.node;
  const Tensor* x = a.inputs[0];
  binary(n.attr<graph::BinaryAttrs>().op, x->data<float>(), x->shape(), a.inputs[1]->data<float>(),
         a.inputs[1]->shape(), a.out.mut<float>(), a.out.shape());
}

void run_hyper_mix(const NodeArgs& a) {
  const graph::Node& n = a.node;
  const Tensor* x = a.inputs[0];
  const auto& p = n.attr<graph::HyperMixAttrs>();
  hyper_mix(x->data<float>(), a.inputs[1]->data<float>(), a.inputs[2]->data<float>(),
            a.out.mut<float>(), x->dim(0), x->dim(1), p.streams, p.iters, p.eps);
}

template <bool kFast>
void add(OpTable& t) {
  entry(t, Op::RmsNorm) = {run_rms_norm<kFast>};
  entry(t, Op::LayerNorm) = {run_layer_norm};
  entry(t, Op::ActMul) = {run_act_mul<kFast>};
  entry(t, Op::Activation) = {run_activation<kFast>};
  entry(t, Op::Add) = {run_add<kFast>};
  entry(t, Op::Scale) = {run_scale};
  entry(t, Op::Divide) = {run_divide};
  entry(t, Op::Softcap) = {run_softcap};
  entry(t, Op::Clamp) = {run_clamp};
  entry(t, Op::Xielu) = {run_xielu};
  entry(t, Op::RowStat) = {run_row_stat};
  entry(t, Op::Binary) = {run_binary};
  entry(t, Op::HyperMix) = {run_hyper_mix};
}

}  // namespace

void add_elementwise_ops(OpTable& t, bool fast) {
  fast ? add<true>(t) : add<false>(t);
}

}  // namespace lathe::cpu
