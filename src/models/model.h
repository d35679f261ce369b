// What callers see of a loaded model: its info, a cache for one sequence, and the
// one-sequence forward the lab and `lathe logits` use. Every architecture implements it as a
// GraphModel (models/engine.h), which builds step graphs for the engine.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "graph/executor.h"
#include "graph/state.h"
#include "io/checkpoint.h"

namespace lathe {

class Model;

struct ModelOptions {
  // Storage type of the large weight matrices: F32 or BF16. Unset: the checkpoint's own
  // (F16 checkpoints compute from F32). Norms, biases and activations are always F32.
  std::optional<DType> dtype = {};
  // Q8_0 or Q4_0: every Linear and expert matrix whose rows are whole groups of 64 is
  // quantized once at load (core/quant.h, graph/quantize.h); the rest keep `dtype`.
  std::optional<DType> quantize = {};
  // MXFP4 matrices of a checkpoint (GptOss's experts, quantization_config quant_method
  // "mxfp4") run natively by default: repacked at load into DType::MXFP4 (core/mxfp4.h),
  // whose kernels multiply f32 activations by the exactly dequantized weights. true
  // dequantizes them at load into `dtype` instead, as transformers does on a CPU
  // (`--mxfp4 dequantize`); the numbers are the same up to the order of f32 sums.
  bool dequantize_mxfp4 = false;
  // Block-scaled FP8 matrices (quantization_config quant_method "fp8") run natively by
  // default: repacked at load into DType::FP8 (core/fp8.h), whose kernels multiply f32
  // activations by the exactly dequantized weights. true dequantizes them at load into
  // `dtype` instead, as transformers does on a CPU (`--fp8 dequantize`): the same numbers up
  // to the order of f32 sums in f32, and the weights rounded to bf16 in bf16.
  bool dequantize_fp8 = false;
  // Weights the model computes with as stored (its dtype) stay views of the mapped files: a
  // load that reads nothing, and pages shared with other processes. true copies them at load
  // into memory of the process's own, on 2 MiB pages where the kernel allows (core/pages.h;
  // `--copy-weights`): steps stream them faster, and the load costs the copy
  // (docs/performance-log.md, "Huge pages for the weights"). A sharded rank's slices and
  // quantized matrices are copies either way, so their sources stay mapped there.
  bool copy_weights = false;
  // Called with the loaded model, whose place it takes: a sharded run's worker makes it one
  // rank's model (src/shard/rank_graph.h, ShardedModel).
  std::function<std::unique_ptr<Model>(std::unique_ptr<Model>)> wrap = {};
};

// Called with every named intermediate ("embed", "layer.3.q", "layer.3.out", "final_norm")
// when set, so tools can compare a run node by node with the reference.
using Trace = graph::Trace;

// What a caller needs to know about a loaded model.
struct ModelInfo {
  std::string architecture;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  DType weight_dtype = DType::F32;
  // Q8_0 or Q4_0 when the matrices were quantized at load (ModelOptions::quantize).
  std::optional<DType> quantized;
  int64_t quantized_matrices = 0;  // those quantized; the others keep weight_dtype
  uint64_t quantized_bytes = 0;    // their bytes once quantized
  // When a decode step would take a sequence from this many positions to one more, the whole
  // sequence is run again from an empty cache instead (generate.h: rebuilds_cache). Phi-3
  // with longrope sets it to original_max_position_embeddings, as transformers'
  // Phi3ForCausalLM.prepare_inputs_for_generation drops its cache there: the schedule turns
  // to its long factors, and the cached keys were rotated with the short ones. 0: never.
  int64_t rebuild_cache_at = 0;
  // What of a multimodal checkpoint runs, for `lathe inspect` (empty: all of it), e.g. "the
  // text model (model.language_model.); not loaded: 20 vision tower tensors (model.visual.)".
  std::string runs;
};

class Model {
 public:
  virtual ~Model() = default;
  const ModelInfo& info() const { return info_; }
  // A multimodal wrapper's loader says which part of its checkpoint the model is.
  void set_runs(std::string runs) { info_.runs = std::move(runs); }

  // A cache of max_seq positions for one sequence, laid out as the model's layers need, its
  // keys and values stored as kv_dtype (F32, or BF16: Context::kv_dtype).
  virtual KVCache new_cache(int64_t max_seq, DType kv_dtype = DType::F32) const {
    return KVCache(info_.num_layers, max_seq, info_.kv_heads, info_.head_dim, kv_dtype);
  }

  // Runs `ids` at positions [cache.length, cache.length + ids.size()), appends their keys
  // and values to the cache, and returns logits [ids.size(), vocab] when all_logits is set,
  // else [1, vocab] for the last position only.
  virtual Tensor forward(Context& ctx, std::span<const int32_t> ids, KVCache& cache,
                         bool all_logits, const Trace* trace = nullptr) const = 0;

 protected:
  ModelInfo info_;
};

}  // namespace lathe
