// The reference a lab run is judged against: transformers f32 on CPU. It comes from the
// bridge (tools/reference/bridge.py, run when Python with transformers and torch is there)
// or from the reference cache, which holds what the bridge made before, keyed by the model's
// content hash, the prompt and the reference versions. The tiny fixtures' committed goldens
// are such cache entries, made by transformers when the fixture was made.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "io/safetensors.h"

namespace lathe {

struct Reference {
  std::string source;  // "bridge" or "cache"
  std::string transformers_version, torch_version;
  std::vector<int32_t> prompt_ids, greedy_tokens;
  std::vector<double> greedy_margins;  // top-1 minus top-2 logit per generated token
  std::vector<int32_t> teacher_forced_ids;
  Tensor logits;                                       // [teacher_forced_ids, vocab] F32
  std::vector<std::pair<std::string, Tensor>> hidden;  // "embed", "layer.N.out", "final_norm"
  // [steps, vocab] F32: generate's logits after the prompt and after each of the first
  // greedy tokens (format 2); empty in format 1 entries, which are then not decode-checked.
  Tensor decode_logits;
  std::string script;                   // the command that reproduces it
  std::filesystem::path dir;            // the cache entry
  std::optional<SafetensorsFile> file;  // keeps the tensors' bytes mapped
};

// SHA-256 over the files that decide a model's outputs: config.json, generation_config.json,
// the safetensors index and every safetensors file (names, sizes and bytes), hex.
std::string model_content_hash(const std::filesystem::path& dir);

// The cache folder of (model hash, prompt, tokens to generate); entries below it are named
// by the reference versions that made them.
std::filesystem::path reference_key_dir(const std::filesystem::path& cache_root,
                                        const std::string& model_hash,
                                        const std::vector<int32_t>& prompt_ids,
                                        int64_t max_new_tokens);

// The newest entry of the key (by transformers version), or nullopt. Throws lathe::Error
// naming the file when an entry is malformed.
std::optional<Reference> lookup_reference(const std::filesystem::path& key_dir);

// Reads one entry folder (reference.json + reference.safetensors, the golden format).
Reference read_reference(const std::filesystem::path& entry_dir, const std::string& source);

// Stores a tiny fixture's goldens (made by transformers) as a cache entry of `key_dir`.
void import_golden(const std::filesystem::path& fixture, const std::filesystem::path& key_dir);

struct BridgeOptions {
  std::string python;  // interpreter with torch and transformers
  std::string script;  // tools/reference/bridge.py
  double timeout_seconds = 3600;
};

// Runs the bridge on `model_dir` and stores its output as a cache entry of `key_dir`.
// Throws lathe::Error with the bridge's last output lines when it fails.
Reference run_bridge(const BridgeOptions& opts, const std::filesystem::path& model_dir,
                     const std::vector<int32_t>& prompt_ids, int64_t max_new_tokens,
                     const std::filesystem::path& key_dir);

}  // namespace lathe
