#include "models/model.h"

namespace lathe {

KVCache::KVCache(int64_t num_layers, int64_t max_seq_len, int64_t kv_heads, int64_t head_dim)
    : max_seq(max_seq_len) {
  for (int64_t i = 0; i < num_layers; ++i)
    layers.push_back({Tensor::zeros(DType::F32, {max_seq_len, kv_heads, head_dim}),
                      Tensor::zeros(DType::F32, {max_seq_len, kv_heads, head_dim})});
}

uint64_t KVCache::bytes() const {
  uint64_t total = 0;
  for (const auto& l : layers) total += l.k.nbytes() + l.v.nbytes();
  return total;
}

}  // namespace lathe
