// Per-sequence state a step reads and appends to, owned by the caller and declared by the
// model layer by layer: full-attention KV (one slot per position up to max_seq),
// sliding-window KV (a ring of slots sized by the window, not by max_seq), or recurrent state
// (a fixed-size tensor per sequence, for convolution and SSM / linear-attention layers).
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace lathe {

enum class StateKind : uint8_t { FullKV, SlidingKV, Recurrent };

// What one layer keeps between steps.
struct LayerStateSpec {
  StateKind kind = StateKind::FullKV;
  int64_t kv_heads = 0, head_dim = 0;
  int64_t window = 0;  // SlidingKV: keys a query sees (itself included)
  // Recurrent: the shapes of the layer's state tensors (a gated delta-rule layer keeps its
  // convolution's last inputs and the delta rule's matrix), F32, zeros at the start.
  std::vector<Shape> recurrent = {};
  // KV kinds: the values' head size; 0: no value cache, the values are the keys' first dims
  // (MLA); -1: head_dim.
  int64_t v_head_dim = -1;
  // FullKV: > 0 when the layer also keeps an index key of index_dim floats per position
  // (DeepSeek sparse attention's indexer, graph Op::Indexer).
  int64_t index_dim = 0;
  // DeepseekV4's compressors (graph Op::Compress), each making one entry of `dim` floats per
  // `rate` positions from rows of `width` kv and gate channels (width 2 dim with overlap).
  struct Compressor {
    int64_t rate = 0, dim = 0, width = 0;
  };
  std::vector<Compressor> compressors = {};
};

// One sequence's state: KVCache keeps its historical name.
struct KVCache {
  struct Layer {
    StateKind kind = StateKind::FullKV;
    // KV kinds: keys [slots, kv_heads, head_dim] and values [slots, kv_heads, v_head_dim]
    // (undefined when the keys hold them); position p lives in slot p % slots (slots ==
    // max_seq for full attention, so that is slot p). F32, or BF16 (the cache's kv_dtype:
    // each key and value rounded to nearest even when appended, widened exactly when read).
    Tensor k = {}, v = {};
    // FullKV with LayerStateSpec::index_dim: the indexer's keys [slots, index_dim], F32
    // whatever kv_dtype is (they choose keys, so they are kept as computed).
    Tensor index_k = {};
    int64_t slots = 0;
    std::vector<Tensor> states = {};  // Recurrent: as LayerStateSpec::recurrent
    // LayerStateSpec::compressors: the entries made so far [max_seq / rate, dim] (entry w
    // from positions [w rate, (w + 1) rate)), and the kv and gate rows (gate with its
    // position bias added) of the last 2 rate positions, position p in row p % (2 rate)
    // [2 rate, 2 width]. F32 whatever kv_dtype is.
    struct Compressed {
      int64_t rate = 0;
      Tensor entries = {}, recent = {};
    };
    std::vector<Compressed> compressed = {};
  };
  std::vector<Layer> layers;
  int64_t max_seq = 0;
  int64_t length = 0;  // positions filled so far

  KVCache() = default;
  // Full-attention KV on every layer. kv_dtype: the keys' and values' storage, F32 or BF16
  // (recurrent state is F32 whatever it is).
  KVCache(int64_t layers, int64_t max_seq, int64_t kv_heads, int64_t head_dim,
          DType kv_dtype = DType::F32);
  // Layers as declared. A sliding layer gets window - 1 + max_step_tokens slots (at most
  // max_seq): room for every key the step's queries see, so a step must not append more than
  // max_step_tokens positions to one sequence (the engine splits longer prompts).
  KVCache(const std::vector<LayerStateSpec>& specs, int64_t max_seq, int64_t max_step_tokens,
          DType kv_dtype = DType::F32);
  // Forgets every position (recurrent state back to zeros).
  void clear();
  uint64_t bytes() const;
  // The most positions one step may append (max_seq when no layer is a ring).
  int64_t max_step_tokens() const { return max_step_; }
  // The KV layers' storage type (F32 or BF16).
  DType kv_dtype() const { return kv_dtype_; }

 private:
  int64_t max_step_ = 0;
  DType kv_dtype_ = DType::F32;
};

}  // namespace lathe
