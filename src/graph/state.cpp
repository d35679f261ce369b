#include "graph/state.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace lathe {

namespace {
void check_kv_dtype(DType kv_dtype) {
  if (kv_dtype != DType::F32 && kv_dtype != DType::BF16)
    fail("internal: a KV cache stores F32 or BF16, not ", dtype_name(kv_dtype));
}
}  // namespace

KVCache::KVCache(int64_t num_layers, int64_t max_seq_len, int64_t kv_heads, int64_t head_dim,
                 DType kv_dtype)
    : max_seq(max_seq_len), max_step_(max_seq_len), kv_dtype_(kv_dtype) {
  check_kv_dtype(kv_dtype);
  for (int64_t i = 0; i < num_layers; ++i)
    layers.push_back({.kind = StateKind::FullKV,
                      .k = Tensor::zeros(kv_dtype, {max_seq_len, kv_heads, head_dim}),
                      .v = Tensor::zeros(kv_dtype, {max_seq_len, kv_heads, head_dim}),
                      .slots = max_seq_len});
}

KVCache::KVCache(const std::vector<LayerStateSpec>& specs, int64_t max_seq_len,
                 int64_t max_step_tokens, DType kv_dtype)
    : max_seq(max_seq_len), max_step_(max_seq_len), kv_dtype_(kv_dtype) {
  if (max_seq_len <= 0 || max_step_tokens <= 0)
    fail("internal: KVCache of ", max_seq_len, " positions, steps of ", max_step_tokens);
  check_kv_dtype(kv_dtype);
  for (const LayerStateSpec& s : specs) {
    Layer l{.kind = s.kind};
    switch (s.kind) {
      case StateKind::FullKV:
        l.slots = max_seq_len;
        break;
      case StateKind::SlidingKV:
        if (s.window <= 0) fail("internal: sliding KV layer with window ", s.window);
        l.slots = std::min(max_seq_len, s.window - 1 + max_step_tokens);
        if (l.slots < max_seq_len) max_step_ = std::min(max_step_, max_step_tokens);
        break;
      case StateKind::Recurrent:
        for (const Shape& shape : s.recurrent) l.states.push_back(Tensor::zeros(DType::F32, shape));
        break;
    }
    if (s.kind != StateKind::Recurrent) {
      l.k = Tensor::zeros(kv_dtype, {l.slots, s.kv_heads, s.head_dim});
      const int64_t v_dim = s.v_head_dim < 0 ? s.head_dim : s.v_head_dim;
      if (v_dim > 0) l.v = Tensor::zeros(kv_dtype, {l.slots, s.kv_heads, v_dim});
    }
    if (s.index_dim > 0) {
      if (s.kind != StateKind::FullKV)
        fail("internal: index keys on a layer that is not full attention");
      l.index_k = Tensor::zeros(DType::F32, {l.slots, s.index_dim});
    }
    for (const LayerStateSpec::Compressor& c : s.compressors) {
      if (c.rate <= 0 || c.dim <= 0 || (c.width != c.dim && c.width != 2 * c.dim))
        fail("internal: a compressor of rate ", c.rate, ", ", c.dim, " dims from ", c.width);
      l.compressed.push_back({.rate = c.rate,
                              .entries = Tensor::zeros(DType::F32, {max_seq_len / c.rate, c.dim}),
                              .recent = Tensor::zeros(DType::F32, {2 * c.rate, 2 * c.width})});
    }
    layers.push_back(std::move(l));
  }
}

void KVCache::clear() {
  length = 0;
  for (Layer& l : layers)
    for (Tensor& t : l.states) std::memset(t.mut<void>(), 0, t.nbytes());
}

uint64_t KVCache::bytes() const {
  uint64_t total = 0;
  for (const auto& l : layers) {
    for (const Tensor& t : l.states) total += t.nbytes();
    if (l.k.defined()) total += l.k.nbytes();
    if (l.v.defined()) total += l.v.nbytes();
    if (l.index_k.defined()) total += l.index_k.nbytes();
    for (const Layer::Compressed& c : l.compressed) total += c.entries.nbytes() + c.recent.nbytes();
  }
  return total;
}

}  // namespace lathe
