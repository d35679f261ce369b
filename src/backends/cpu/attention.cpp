#include <algorithm>
#include <cmath>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernels.h"
#include "core/error.h"

namespace lathe::cpu {
namespace {

// A cached key or value as f32: bf16 widened exactly.
inline float widen(float x) {
  return x;
}
inline float widen(uint16_t x) {
  return bf16_to_f32(x);
}

// How many keys query row t attends to when it has chosen keys (the first -1 ends them).
int64_t chosen_count(const AttentionArgs& a, int64_t t) {
  const int32_t* c = a.chosen + t * a.chosen_k;
  int64_t n = 0;
  while (n < a.chosen_k && c[n] >= 0) ++n;
  return n;
}

// One query row of one head: softmax(q . K^T * scale) . V over the visible keys (and the
// head's sink, a logit without a value, when a.sinks is set). T is the caches' element type:
// float, or uint16_t for bf16 caches. The keys are indexed by i in [first, last]: positions
// themselves, or with kChosen the row's chosen positions (DeepSeek sparse attention).
template <class T, bool kChosen>
void attend_one(const AttentionArgs& a, int64_t t, int64_t h, float* scores) {
  const int64_t p = a.pos0 + t;
  int64_t first = a.window > 0 ? std::max<int64_t>(0, p - a.window + 1) : 0;
  if (a.chunk > 0) first = std::max(first, p - p % a.chunk);
  int64_t last = p;
  const int32_t* chosen = kChosen ? a.chosen + t * a.chosen_k : nullptr;
  if constexpr (kChosen) first = 0, last = chosen_count(a, t) - 1;
  auto key = [&](int64_t i) -> int64_t {
    if constexpr (kChosen) return chosen[i];
    return i;
  };
  const int64_t kvh = h / (a.heads / a.kv_heads);
  const int64_t hd = a.head_dim;
  const int64_t stride = a.kv_heads * hd;
  const float* q = a.q + (t * a.heads + h) * hd;
  const float* bias = a.bias ? a.bias + h * a.bias_stride : nullptr;
  float max_score = a.sinks ? a.sinks[h] : -INFINITY;
  auto row = [&](int64_t j) { return (a.slots > 0 ? j % a.slots : j) * stride + kvh * hd; };
  for (int64_t i = first; i <= last; ++i) {
    const T* k = static_cast<const T*>(a.k_cache) + row(key(i));
    float s = 0.0f;
    for (int64_t d = 0; d < hd; ++d) s += q[d] * widen(k[d]);
    s *= a.scale;
    if (a.softcap > 0) s = a.softcap * std::tanh(s / a.softcap);
    if (bias) s += bias[key(i)];
    scores[i - first] = s;
    max_score = std::max(max_score, s);
  }
  // DeepseekV4's compressed entries after the keys: the visible ones, or the chosen of them.
  float* entry_scores = scores + (last - first + 1);
  int64_t entries = 0;
  const int32_t* picked = a.chosen ? a.chosen + t * a.chosen_k : nullptr;
  auto entry = [&](int64_t i) -> int64_t { return picked ? picked[i] : i; };
  if (a.entries) {
    const int64_t visible = (p + 1) / a.entry_rate;
    if (picked) {
      while (entries < a.chosen_k && picked[entries] >= 0) ++entries;
    } else {
      entries = visible;
    }
    for (int64_t i = 0; i < entries; ++i) {
      if (entry(i) >= visible) fail("internal: attention: entry ", entry(i), " not yet visible");
      const float* k = a.entries + entry(i) * hd;
      float s = 0.0f;
      for (int64_t d = 0; d < hd; ++d) s += q[d] * k[d];
      s *= a.scale;
      entry_scores[i] = s;
      max_score = std::max(max_score, s);
    }
  }
  float sum = 0.0f;
  for (int64_t i = first; i <= last; ++i) {
    const float e = std::exp(scores[i - first] - max_score);
    scores[i - first] = e;
    sum += e;
  }
  for (int64_t i = 0; i < entries; ++i)
    sum += (entry_scores[i] = std::exp(entry_scores[i] - max_score));
  if (a.sinks) sum += std::exp(a.sinks[h] - max_score);
  const int64_t vd = a.v_dim;
  float* out = a.out + (t * a.heads + h) * vd;
  std::fill(out, out + vd, 0.0f);
  for (int64_t i = first; i <= last; ++i) {
    const float w = scores[i - first] / sum;
    const int64_t j = key(i);
    const T* v = static_cast<const T*>(a.v_cache) + (a.slots > 0 ? j % a.slots : j) * a.v_row +
                 kvh * a.v_head;
    for (int64_t d = 0; d < vd; ++d) out[d] += w * widen(v[d]);
  }
  for (int64_t i = 0; i < entries; ++i) {
    const float w = entry_scores[i] / sum;
    const float* v = a.entries + entry(i) * hd;
    for (int64_t d = 0; d < vd; ++d) out[d] += w * v[d];
  }
}

void attend_row(const AttentionArgs& a, int64_t t, int64_t h, float* scores) {
  if (a.chosen && !a.entries) {
    if (a.kv_bf16)
      attend_one<uint16_t, true>(a, t, h, scores);
    else
      attend_one<float, true>(a, t, h, scores);
  } else if (a.kv_bf16) {
    attend_one<uint16_t, false>(a, t, h, scores);
  } else {
    attend_one<float, false>(a, t, h, scores);
  }
}

}  // namespace

AttentionScratch attention_scratch(int64_t heads, int64_t score_floats, int64_t v_dim) {
  constexpr int64_t kBudget = int64_t{1} << 20;  // floats
  const int64_t head_floats = score_floats + 2 * attention_value_floats(v_dim);
  return {std::clamp<int64_t>(kBudget / head_floats, 1, std::max<int64_t>(heads, 1)), head_floats};
}

void attention_reference(const AttentionArgs& a) {
  float* scores = a.scratch;
  for (int64_t t = 0; t < a.tokens; ++t)
    for (int64_t h = 0; h < a.heads; ++h) attend_row(a, t, h, scores);
}

namespace {

// The keys query row t sees, plus a row's fixed work (its q, the softmax's passes, its
// output) counted as that many keys.
int64_t row_cost(const AttentionArgs& a, int64_t t) {
  constexpr int64_t kRowWork = 32;
  if (a.chosen && !a.entries) return a.chosen_k + kRowWork;  // at most; counting costs a scan
  const int64_t p = a.pos0 + t;
  int64_t first = a.window > 0 ? std::max<int64_t>(0, p - a.window + 1) : 0;
  if (a.chunk > 0) first = std::max(first, p - p % a.chunk);
  const int64_t entries = a.entries ? (p + 1) / a.entry_rate : 0;
  return p - first + 1 + entries + kRowWork;
}

// The first row of chunk c of `chunks`: the row from which the rows before it hold c / chunks
// of the work (`total`, every row's cost). A scan of the rows' costs, no allocation.
int64_t chunk_start(const AttentionArgs& a, int64_t c, int64_t chunks, int64_t total) {
  const int64_t rows = a.tokens * a.heads;
  if (c <= 0) return 0;
  if (c >= chunks) return rows;
  if (a.tokens == 1) return rows * c / chunks;  // decode: every row sees the same keys
  int64_t done = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (done * chunks >= total * c) return r;
    done += row_cost(a, r / a.heads);
  }
  return rows;
}

}  // namespace

void attention_fast(const AttentionArgs& a, ThreadPool& pool) {
  // One chunk of (token, head) rows per thread, each with its own row of scratch. A causal
  // prompt's later rows see more keys: chunks hold equal shares of the keys seen, not of the
  // rows (halves of a 512-token prompt by rows: one thread with three quarters of the work).
  // A row's result does not depend on its chunk.
  const int64_t rows = a.tokens * a.heads;
  const int64_t chunks = std::min<int64_t>(pool.size(), rows);
  int64_t total = 0;
  if (a.tokens > 1)
    for (int64_t t = 0; t < a.tokens; ++t) total += row_cost(a, t) * a.heads;
  const Isa isa = active_isa();
  pool.parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      float* scores = a.scratch + c * a.scratch_stride;
      const int64_t r0 = chunk_start(a, c, chunks, total);
      const int64_t r1 = chunk_start(a, c + 1, chunks, total);
      switch (a.entries ? Isa::Portable : isa) {
        case Isa::Avx512Bf16:
        case Isa::Avx512:
          avx512::attend_rows(a, r0, r1, scores);
          break;
        case Isa::Avx2:
          avx2::attend_rows(a, r0, r1, scores);
          break;
        case Isa::Portable:
          for (int64_t i = r0; i < r1; ++i) attend_row(a, i / a.heads, i % a.heads, scores);
          break;
      }
    }
  });
}

}  // namespace lathe::cpu
