#include "backends/op_harness.h"

#include <cstring>
#include <numeric>
#include <random>

#include "core/error.h"

namespace lathe::optest {

Tensor random_tensor(Shape shape, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  Tensor t = Tensor::zeros(DType::F32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.mut<float>()[i] = u(rng);
  return t;
}

std::span<const float> floats(const Tensor& t) {
  if (t.dtype() != DType::F32) fail("internal: floats of a ", dtype_name(t.dtype()), " tensor");
  return {t.data<float>(), static_cast<size_t>(t.numel())};
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();  // no value cache (MLA)
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         (a.nbytes() == 0 || std::memcmp(a.data<void>(), b.data<void>(), a.nbytes()) == 0);
}

Tensor cache_history(int64_t pos0, int64_t kv_heads, int64_t head_dim, uint32_t seed, bool value) {
  return random_tensor({pos0, kv_heads, head_dim}, seed * 2 + (value ? 1 : 0));
}

KVCache prefilled_cache(const std::vector<LayerStateSpec>& layers, int64_t max_seq,
                        int64_t max_step_tokens, int64_t pos0, uint32_t seed, DType kv_dtype) {
  KVCache cache(layers, max_seq, max_step_tokens, kv_dtype);
  const size_t size = dtype_size(kv_dtype);
  // Row p of `from` into slot p % slots of `to`, as the attention op appends.
  auto fill = [&](Tensor& to, const Tensor& from, int64_t slots) {
    const int64_t row = to.dim(1) * to.dim(2);
    for (int64_t p = 0; p < pos0; ++p)
      convert_from_f32(
          kv_dtype, from.data<float>() + p * row,
          static_cast<uint8_t*>(to.mut<void>()) + static_cast<size_t>((p % slots) * row) * size,
          static_cast<size_t>(row));
  };
  for (size_t i = 0; i < cache.layers.size(); ++i) {
    KVCache::Layer& l = cache.layers[i];
    if (pos0 == 0) continue;
    const uint32_t s = seed + 101 * static_cast<uint32_t>(i);
    if (l.kind == StateKind::Recurrent) {  // the state a history would have left: any values
      for (size_t j = 0; j < l.states.size(); ++j) {
        const Tensor r = random_tensor(l.states[j].shape(), s + static_cast<uint32_t>(j));
        std::memcpy(l.states[j].mut<void>(), r.data<void>(), r.nbytes());
      }
      continue;
    }
    if (l.index_k.defined()) {  // DSA's index keys: F32 rows of their own history
      const Tensor h = random_tensor({pos0, l.index_k.dim(1)}, s + 50);
      std::memcpy(l.index_k.mut<void>(), h.data<void>(), h.nbytes());
    }
    fill(l.k, cache_history(pos0, l.k.dim(1), l.k.dim(2), s, false), l.slots);
    if (!l.v.defined()) continue;  // values inside the keys (MLA)
    fill(l.v, cache_history(pos0, l.v.dim(1), l.v.dim(2), s, true), l.slots);
  }
  cache.length = pos0;
  return cache;
}

Step segment_step(std::vector<graph::Segment> segments) {
  Step s;
  for (const graph::Segment& g : segments)
    for (int64_t t = 0; t < g.count; ++t) s.positions.push_back(static_cast<int32_t>(g.pos0 + t));
  s.tokens.assign(s.positions.size(), 0);
  s.segments = std::move(segments);
  return s;
}

Step rows_step(int64_t n, int64_t pos0) {
  return segment_step({{.seq = 0, .first = 0, .count = n, .pos0 = pos0}});
}

const char* mode_name(Mode m) {
  return m == Mode::Planned ? "planned" : "eager";
}

Outcome run(const Backend& backend, ThreadPool& pool, Mode mode, const Build& build,
            const Step& step) {
  Outcome out;
  if (step.caches) out.caches = step.caches();
  std::vector<KVCache*> caches;
  int64_t max_context = 0;
  for (KVCache& c : out.caches) {
    caches.push_back(&c);
    max_context = std::max(max_context, c.max_seq);
  }
  const graph::StepData data{.tokens = step.tokens,
                             .positions = step.positions,
                             .logit_rows = step.logit_rows,
                             .segments = step.segments,
                             .caches = caches,
                             .max_context = max_context};
  if (mode == Mode::Planned) {
    graph::Builder b;
    const std::vector<graph::Value> values = build(b);
    for (graph::Value v : values) b.output(v);
    graph::Plan plan(std::move(b.graph()), backend, pool.size(), max_context);
    plan.run(pool, data);
    for (graph::Value v : values) out.values.push_back(plan.value(v).clone());
  } else {
    graph::EagerRunner runner(backend, pool, data);
    graph::Builder b(runner.hook());
    for (graph::Value v : build(b)) out.values.push_back(runner.value(v).clone());
  }
  return out;
}

::testing::AssertionResult same_caches(const Outcome& a, const Outcome& b) {
  if (a.caches.size() != b.caches.size())
    return ::testing::AssertionFailure() << a.caches.size() << " caches vs " << b.caches.size();
  for (size_t c = 0; c < a.caches.size(); ++c)
    for (size_t l = 0; l < a.caches[c].layers.size(); ++l) {
      const KVCache::Layer &x = a.caches[c].layers[l], &y = b.caches[c].layers[l];
      if (!same_bits(x.k, y.k) || !same_bits(x.v, y.v) || !same_bits(x.index_k, y.index_k))
        return ::testing::AssertionFailure() << "cache " << c << " layer " << l << " differs";
      if (x.states.size() != y.states.size())
        return ::testing::AssertionFailure() << "cache " << c << " layer " << l << " states";
      for (size_t j = 0; j < x.states.size(); ++j)
        if (!same_bits(x.states[j], y.states[j]))
          return ::testing::AssertionFailure()
                 << "cache " << c << " layer " << l << " state " << j << " differs";
    }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult same_outcome(const Outcome& a, const Outcome& b) {
  if (a.values.size() != b.values.size())
    return ::testing::AssertionFailure() << a.values.size() << " values vs " << b.values.size();
  for (size_t i = 0; i < a.values.size(); ++i)
    if (!same_bits(a.values[i], b.values[i]))
      return ::testing::AssertionFailure()
             << "value " << i << " " << shape_str(a.values[i].shape()) << " differs";
  return same_caches(a, b);
}

}  // namespace lathe::optest
