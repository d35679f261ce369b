#include "models/weights.h"

#include <algorithm>

#include "core/error.h"
#include "models/fp8.h"
#include "models/mxfp4.h"

namespace lathe {
namespace {

DType default_matrix_dtype(const Checkpoint& ckpt) {
  // The dtype most of the checkpoint's bytes are in decides; F16 computes from F32.
  // Packed quantized data (MXFP4's U8 blocks and scales, FP8 codes) is repacked into its own
  // type, or dequantized into the matrix dtype, and does not count.
  uint64_t bf16 = 0, other = 0;
  for (const auto& name : ckpt.tensor_names()) {
    const auto& e = ckpt.entry(name);
    if (e.dtype_name == "U8" || e.dtype_name == "F8_E4M3") continue;
    (e.dtype_name == "BF16" ? bf16 : other) += e.end - e.begin;
  }
  return bf16 > other ? DType::BF16 : DType::F32;
}

std::string join_names(const std::vector<std::string>& names, size_t limit) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < limit; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > limit) out += cat(", ... (", names.size(), " in all)");
  return out;
}

}  // namespace

Weights::Weights(const Checkpoint& ckpt, std::optional<DType> matrix_dtype, bool fp8_native)
    : ckpt_(ckpt),
      matrix_dtype_(matrix_dtype.value_or(default_matrix_dtype(ckpt))),
      fp8_native_(fp8_native) {
  if (matrix_dtype_ != DType::F32 && matrix_dtype_ != DType::BF16)
    fail("weights can be computed in f32 or bf16, not ", dtype_name(matrix_dtype_));
  // Quantized checkpoints lathe reads: block-scaled FP8 (its F8_E4M3 matrices repacked or
  // dequantized by matrix()) and MXFP4 (GptOss's experts, through mxfp4()). Others (GPTQ, AWQ,
  // bitsandbytes, ...) hold tensors lathe cannot compute with: one error names the method.
  const Json& config = ckpt_.config();
  if (config.is_object() && config.contains("quantization_config")) {
    const Json& q = config["quantization_config"];
    const Json method = q.is_object() ? q.value("quant_method", Json()) : Json();
    const std::string where = cat(ckpt_.config_path(), ": field \"quantization_config\"");
    if (method == "fp8") {
      if (q.contains("fmt") && q["fmt"] != "e4m3")
        fail(where, " has fmt ", q["fmt"].dump(), "; lathe reads FP8 checkpoints in \"e4m3\"");
    } else if (method != "mxfp4") {
      fail(where, " has quant_method ", method.dump(),
           "; lathe reads block-scaled \"fp8\" (E4M3) and \"mxfp4\" checkpoints");
    }
  }
  // Non-persistent rotary buffers that old checkpoints carry; transformers ignores them.
  ignore_if([](const std::string& n) { return n.ends_with("rotary_emb.inv_freq"); });
}

void Weights::ignore_if(const std::function<bool(const std::string&)>& pred) {
  for (const auto& name : ckpt_.tensor_names())
    if (pred(name)) used_.insert(name);
}

int64_t Weights::ignore_prefixes(const std::vector<std::string>& prefixes) {
  int64_t count = 0;
  ignore_if([&](const std::string& name) {
    for (const std::string& prefix : prefixes)
      if (name.starts_with(prefix)) {
        ++count;
        return true;
      }
    return false;
  });
  return count;
}

Tensor Weights::fetch(const std::string& name, const Shape& shape, DType want) {
  used_.insert(name);
  if (!ckpt_.has(name)) {
    missing_.push_back(name);
    return placeholder(name, shape, want);
  }
  const SafetensorsEntry& e = ckpt_.entry(name);
  if (e.shape != shape) {
    problems_.push_back(cat("tensor \"", name, "\" in ", ckpt_.file_of(name), " has shape ",
                            shape_str(e.shape), ", expected ", shape_str(shape)));
    return placeholder(name, shape, want);
  }
  Tensor t = ckpt_.tensor(name);
  if (t.dtype() == DType::I32) {
    problems_.push_back(cat("tensor \"", name, "\" in ", ckpt_.file_of(name),
                            " holds integers, expected floating point"));
    return placeholder(name, shape, want);
  }
  if (t.dtype() == want) {
    if (ckpt_.copy_views() && !keep_mapped_) return copied(name, t);
    viewed_.insert(name);
    return t;  // a view of the mapping
  }
  Tensor converted = t.to(want);
  // The source pages are not needed again: give them back, so that an f32 checkpoint run in
  // bf16 never holds both (issue 19 item 7). Not while a view fetched earlier is alive.
  t = Tensor();
  if (!viewed_.count(name)) ckpt_.release(name);
  return converted;
}

Tensor Weights::copied(const std::string& name, Tensor t) {
  if (auto it = copies_.find(name); it != copies_.end()) return it->second;
  Tensor copy = t.clone();
  t = Tensor();
  if (!viewed_.count(name)) ckpt_.release(name);
  return copies_.emplace(name, std::move(copy)).first->second;
}

Tensor Weights::placeholder(const std::string& name, const Shape& shape, DType want) {
  // The shape comes from config.json: a config that does not describe these weights (a
  // missing field takes the architecture's full-size default) must not allocate gigabytes.
  uint64_t bytes = dtype_size(want);
  bool overflow = false;
  for (int64_t d : shape)
    overflow = overflow || d < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes);
  if (overflow || __builtin_add_overflow(placeholder_bytes_, bytes, &placeholder_bytes_) ||
      placeholder_bytes_ > ckpt_.total_tensor_bytes())
    fail(ckpt_.dir().string(), ": tensor \"", name, "\" of shape ", shape_str(shape),
         " is missing or misshapen, and the shapes config.json gives outgrow the checkpoint's ",
         ckpt_.total_tensor_bytes(), " bytes of weights: config.json does not describe them",
         problems_.empty() ? "" : cat(" (first problem: ", problems_.front(), ")"));
  return Tensor::zeros(want, shape);
}

std::span<const uint8_t> Weights::bytes(const std::string& name, const Shape& shape,
                                        const std::string& dtype_name) {
  used_.insert(name);
  if (!ckpt_.has(name)) {
    missing_.push_back(name);
    return {};
  }
  const SafetensorsEntry& e = ckpt_.entry(name);
  if (e.shape != shape || e.dtype_name != dtype_name) {
    problems_.push_back(cat("tensor \"", name, "\" in ", ckpt_.file_of(name), " is ", e.dtype_name,
                            " ", shape_str(e.shape), ", expected ", dtype_name, " ",
                            shape_str(shape)));
    return {};
  }
  return ckpt_.bytes(name);
}

Tensor Weights::mxfp4(const std::string& name, const Shape& shape, bool native) {
  if (shape.size() < 2 || shape.back() % kMxfp4Block != 0) {
    problems_.push_back(cat("MXFP4 matrix \"", name, "\" of shape ", shape_str(shape),
                            ": the last dimension must be a multiple of ", kMxfp4Block));
    return placeholder(name + "_blocks", shape, matrix_dtype_);
  }
  Shape scales_shape = shape;
  scales_shape.back() /= kMxfp4Block;
  Shape blocks_shape = scales_shape;
  blocks_shape.push_back(kMxfp4Block / 2);
  const auto blocks = bytes(name + "_blocks", blocks_shape, "U8");
  const auto scales = bytes(name + "_scales", scales_shape, "U8");
  if (blocks.empty() || scales.empty()) return placeholder(name + "_blocks", shape, matrix_dtype_);
  Tensor out = record({name + "_blocks", name + "_scales"},
                      native ? pack_mxfp4(blocks, scales, shape)
                             : dequantize_mxfp4(blocks, scales, shape, matrix_dtype_),
                      true);
  // The packed bytes are not needed again: give their pages back, so that the model holds
  // its copy only (the repacked blocks are 17 bytes where the mapping had 16 + 1).
  for (const std::string& part : {name + "_blocks", name + "_scales"})
    if (!viewed_.count(part)) ckpt_.release(part);
  return out;
}

Tensor Weights::fp8(const std::string& name, const Shape& shape) {
  const std::string scale_name = name + "_scale_inv";
  used_.insert(name);
  used_.insert(scale_name);
  const SafetensorsEntry& e = ckpt_.entry(name);
  auto problem = [&](const std::string& what) {
    problems_.push_back(cat("FP8 tensor \"", name, "\" in ", ckpt_.file_of(name), ": ", what));
    return placeholder(name, shape, matrix_dtype_);
  };
  if (e.shape != shape)
    return problem(cat("shape ", shape_str(e.shape), ", expected ", shape_str(shape)));
  if (shape.size() < 2) return problem("not a matrix");
  if (!ckpt_.has(scale_name)) return problem(cat("no \"", scale_name, "\" beside it"));
  const SafetensorsEntry& s = ckpt_.entry(scale_name);
  // The scale grid: [.., rows / block rows, cols / block cols] (or one scale for the tensor).
  Shape grid = s.shape;
  if (grid.empty() || (grid.size() == 1 && grid[0] == 1)) grid = Shape(shape.size(), 1);
  const bool leading_ok =
      grid.size() == shape.size() && std::equal(grid.begin(), grid.end() - 2, shape.begin());
  const int64_t rows = shape[shape.size() - 2], cols = shape.back();
  const int64_t grid_rows = leading_ok ? grid[grid.size() - 2] : 0;
  const int64_t grid_cols = leading_ok ? grid.back() : 0;
  if (!leading_ok || grid_rows < 1 || grid_cols < 1 || rows % grid_rows || cols % grid_cols)
    return problem(cat("its scale grid \"", scale_name, "\" ", shape_str(s.shape),
                       " does not divide the weight's ", shape_str(shape), " into blocks"));
  if (s.dtype_name != "F32" && s.dtype_name != "BF16")
    return problem(cat("scales of dtype ", s.dtype_name, " (F32 and BF16 are read)"));
  const Tensor scales = ckpt_.tensor(scale_name).to(DType::F32);
  const std::span<const float> grid_values(scales.data<float>(),
                                           static_cast<size_t>(scales.numel()));
  Tensor out;
  if (fp8_native_) out = pack_fp8(ckpt_.bytes(name), shape, grid_values, grid_rows, grid_cols);
  if (!out.defined())
    out =
        dequantize_fp8(ckpt_.bytes(name), shape, grid_values, grid_rows, grid_cols, matrix_dtype_);
  if (!viewed_.count(name)) ckpt_.release(name);  // the codes are not needed again
  return out;
}

Tensor Weights::record(std::vector<std::string> names, Tensor t, bool matrix) {
  if (FetchLog* log = ckpt_.fetch_log()) {
    for (std::string& n : names) n = ckpt_.stored(n);  // the checkpoint's own names
    log->records.push_back({std::move(names), t, matrix});
  }
  return t;
}

Tensor Weights::transposed(const std::string& name, Tensor t) {
  if (FetchLog* log = ckpt_.fetch_log())
    log->records.push_back({{ckpt_.stored(name)}, t, true, true});
  return t;
}

Tensor Weights::gathered(const std::string& name, const Tensor& source, Tensor t,
                         std::vector<int64_t> rows_from) {
  FetchLog* log = ckpt_.fetch_log();
  if (!log) return t;
  // A gathered copy of a transposed one (a Conv1D) is itself of the transposed matrix.
  bool transposed = false;
  for (const FetchRecord& r : log->records)
    if (r.tensor.data<void>() == source.data<void>()) transposed = r.transposed;
  log->records.push_back(
      {{ckpt_.stored(name)}, t, source.rank() == 2, transposed, std::move(rows_from)});
  return t;
}

Tensor Weights::matrix(const std::string& name, const Shape& shape) {
  if (ckpt_.has(name) && ckpt_.entry(name).dtype_name == "F8_E4M3")
    return record({name, name + "_scale_inv"}, fp8(name, shape), true);
  return record({name}, fetch(name, shape, matrix_dtype_), true);
}

Tensor Weights::vector(const std::string& name, const Shape& shape) {
  return record({name}, fetch(name, shape, DType::F32), false);
}

void Weights::finish(const std::string& architecture) const {
  std::vector<std::string> unused;
  for (const auto& name : ckpt_.tensor_names())
    if (!used_.count(name)) unused.push_back(name);
  std::string msg;
  if (!missing_.empty())
    msg += cat(ckpt_.dir().string(), ": missing tensors for ", architecture, ": ",
               join_names(missing_, 8));
  for (const auto& p : problems_) msg += (msg.empty() ? "" : "; ") + p;
  if (!unused.empty())
    msg += cat(msg.empty() ? "" : "; ", ckpt_.dir().string(), ": tensors ", architecture,
               " does not use: ", join_names(unused, 8));
  if (!msg.empty()) throw Error(msg);
}

}  // namespace lathe
