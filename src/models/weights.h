// Fetching a model's weights from a checkpoint by their Hugging Face names, with every
// problem collected so that one error lists all missing, misshapen and unused tensors.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "io/checkpoint.h"

namespace lathe {

class Weights {
 public:
  // `matrix_dtype`: storage for matrices (F32 or BF16); unset keeps the checkpoint's own.
  // `fp8_native`: a block-scaled FP8 checkpoint's matrices are kept as DType::FP8 (false:
  // dequantized into the matrix dtype; ModelOptions::dequantize_fp8).
  Weights(const Checkpoint& ckpt, std::optional<DType> matrix_dtype, bool fp8_native = true);

  // A 2-D weight of a linear layer or embedding: when already in the matrix dtype, copied
  // once or kept mapped (Checkpoint::copy_views), else converted once here. Stored as F8_E4M3 (a
  // block-scaled FP8 checkpoint), it is repacked with its `<name>_scale_inv` into DType::FP8
  // (`fp8_native`, when the blocks allow: models/fp8.h's pack_fp8) or dequantized into the matrix
  // dtype. A caller that needs its elements (a transpose) converts it with Tensor::to.
  Tensor matrix(const std::string& name, const Shape& shape);
  // A norm weight or bias, always F32 (small; converted when stored otherwise).
  Tensor vector(const std::string& name, const Shape& shape);
  // A matrix (or stack of matrices) of `shape` [.., rows, cols] stored as MXFP4: name +
  // "_blocks" U8 [.., rows, cols / 32, 16] and name + "_scales" U8 [.., rows, cols / 32]
  // (models/mxfp4.h), repacked once here into DType::MXFP4 (`native`: its own kernels run
  // it) or dequantized into the matrix dtype. Either way the mapped blocks and scales are
  // given back afterwards (SafetensorsFile::release).
  Tensor mxfp4(const std::string& name, const Shape& shape, bool native);
  // Records, for the fetch log, that `t` is the matrix `name` transposed (a Conv1D weight);
  // returns it.
  Tensor transposed(const std::string& name, Tensor t);
  // Records that `t` gathers rows of `source` (as fetched for `name`): its row i is source's
  // row rows_from[i]; returns it.
  Tensor gathered(const std::string& name, const Tensor& source, Tensor t,
                  std::vector<int64_t> rows_from);
  bool has(const std::string& name) const { return ckpt_.has(name); }
  // Marks a tensor the reference implementation also ignores (e.g. a tied lm_head copy).
  void ignore(const std::string& name) { used_.insert(name); }
  void ignore_if(const std::function<bool(const std::string&)>& pred);
  // Marks every tensor under one of `prefixes` (a multimodal checkpoint's vision and audio
  // towers); returns how many.
  int64_t ignore_prefixes(const std::vector<std::string>& prefixes);

  // Throws lathe::Error listing every missing or misshapen tensor and every tensor of the
  // checkpoint that the model did not use.
  void finish(const std::string& architecture) const;

  DType matrix_dtype() const { return matrix_dtype_; }

  // While one lives, the tensors fetched as stored stay views of the mapping even where the
  // checkpoint copies them (Checkpoint::copy_views): a MoE block's routed experts, of which a
  // step reads only those it routes to, so that the rest never become resident (models/moe.h).
  class KeepMapped {
   public:
    explicit KeepMapped(Weights& w) : w_(w), was_(w.keep_mapped_) { w.keep_mapped_ = true; }
    ~KeepMapped() { w_.keep_mapped_ = was_; }
    KeepMapped(const KeepMapped&) = delete;
    KeepMapped& operator=(const KeepMapped&) = delete;

   private:
    Weights& w_;
    bool was_;
  };

 private:
  Tensor fetch(const std::string& name, const Shape& shape, DType want);
  // The tensor `name` as stored (t, a view of the mapping) copied into owned memory once
  // (Checkpoint::copy_views), the mapped pages given back.
  Tensor copied(const std::string& name, Tensor t);
  // Adds `t` to the checkpoint's fetch log, when it has one; returns it.
  Tensor record(std::vector<std::string> names, Tensor t, bool matrix);
  Tensor fp8(const std::string& name, const Shape& shape);
  // Zeros standing in for a missing or misshapen tensor, so finish() can report every problem
  // at once; throws when the stand-ins would outgrow the checkpoint itself.
  Tensor placeholder(const std::string& name, const Shape& shape, DType want);
  // The stored bytes of a packed tensor of this shape and safetensors dtype, a view of the
  // mapping for the caller to copy from, then release; empty when it is missing or misshapen
  // (recorded for finish()).
  std::span<const uint8_t> bytes(const std::string& name, const Shape& shape,
                                 const std::string& dtype_name);

  const Checkpoint& ckpt_;
  DType matrix_dtype_;
  bool fp8_native_;
  std::set<std::string> used_;
  std::set<std::string> viewed_;          // fetched as views of the mapping: never released
  bool keep_mapped_ = false;              // KeepMapped
  std::map<std::string, Tensor> copies_;  // copied(), by name: a tensor fetched again is shared
  std::vector<std::string> missing_;
  std::vector<std::string> problems_;
  uint64_t placeholder_bytes_ = 0;
};

}  // namespace lathe
