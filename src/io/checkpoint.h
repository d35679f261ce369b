// A Hugging Face checkpoint folder as published: config.json, generation_config.json and
// model.safetensors or a sharded set with model.safetensors.index.json.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "io/json.h"
#include "io/safetensors.h"

namespace lathe {

// What generation_config.json (falling back to config.json) says about decoding.
struct GenerationConfig {
  std::vector<int32_t> eos_token_ids;  // generation stops on any of them
  std::optional<int32_t> bos_token_id;
  std::optional<int32_t> pad_token_id;
  bool do_sample = false;
  double temperature = 1.0;
  int64_t top_k = 50;
  double top_p = 1.0;
  double min_p = 0.0;
  double repetition_penalty = 1.0;
  std::optional<int64_t> max_new_tokens;
};

// What a model's loader took from a checkpoint: each tensor it fetched and what it made of it
// (a view of the mapping, or a converted copy). Recorded only when a caller sets a log
// (Checkpoint::set_fetch_log): the shard planner (src/shard) finds a step graph's weights
// among these by address, and so learns which checkpoint tensor each graph weight is.
struct FetchRecord {
  // The checkpoint tensors it was made from: the tensor, then its companions (an MXFP4
  // matrix's "_scales", an FP8 matrix's "_scale_inv"); for MXFP4 the first is "_blocks".
  std::vector<std::string> names;
  // As loaded. Kept alive by the log, so that a copy the loader rearranged and dropped cannot
  // have its address reused by a later tensor.
  Tensor tensor;
  bool matrix = false;  // fetched as a matrix (the matrix dtype), else a vector (always F32)
  // The stored matrix transposed ([in, out] as a Conv1D keeps it, loaded as [out, in]).
  bool transposed = false;
  // Non-empty: a copy gathering rows of what was loaded: its row i is loaded row rows_from[i]
  // (the q, k and v of a per-head interleaved [q k v] tensor).
  std::vector<int64_t> rows_from = {};
};
struct FetchLog {
  std::vector<FetchRecord> records;
};

class Checkpoint {
 public:
  // Reads the folder's config.json and opens (maps) every safetensors file. Throws
  // lathe::Error naming the file when a file is missing or invalid.
  static Checkpoint open(const std::filesystem::path& dir);

  const std::filesystem::path& dir() const { return dir_; }
  const Json& config() const { return config_; }
  std::string config_path() const {
    return config_what_.empty() ? (dir_ / "config.json").string() : (dir_ / config_what_).string();
  }
  const GenerationConfig& generation() const { return generation_; }

  // The value of config.json's "architectures"[0] (or "" when absent).
  std::string architecture() const;

  bool has(const std::string& name) const { return where_.count(name) != 0; }
  std::vector<std::string> tensor_names() const;
  const SafetensorsEntry& entry(const std::string& name) const;
  // The file that holds `name` (for error messages).
  std::string file_of(const std::string& name) const;
  Tensor tensor(const std::string& name) const;
  // SafetensorsFile::bytes: the stored bytes of any dtype (MXFP4 blocks and scales).
  std::span<const uint8_t> bytes(const std::string& name) const;
  // SafetensorsFile::release: after `name` was converted, its mapped pages are given back.
  void release(const std::string& name) const;
  uint64_t total_tensor_bytes() const;

  // The text model inside a multimodal checkpoint, as a checkpoint of its own: `config` (the
  // wrapper's text_config, completed by the caller) stands for config.json, and each tensor
  // whose name starts with one of `renames`' first prefixes (the first that matches) is seen
  // under the second prefix instead; the other tensors (vision towers, projectors) are left out
  // and counted in left_out(). `what` names the config in error messages
  // ("config.json: text_config").
  Checkpoint text_model(Json config, const std::string& what,
                        const std::vector<std::pair<std::string, std::string>>& renames) const;
  size_t left_out() const { return left_out_; }

  // Where a model's loader records what it fetches (see FetchLog); null: nowhere. The log must
  // outlive the loads; a text_model view records into its parent's log.
  void set_fetch_log(FetchLog* log) { fetch_log_ = log; }
  FetchLog* fetch_log() const { return fetch_log_; }

  // Whether a model's loader copies the tensors it uses as stored into memory of its own
  // (Weights::matrix, Weights::vector), giving back their mapped pages, rather than keeping
  // views of the mapping. load_model sets it (ModelOptions::copy_weights).
  void set_copy_views(bool copy) { copy_views_ = copy; }
  bool copy_views() const { return copy_views_; }

  // The name a tensor is stored under in its file (names differ only in a text_model view).
  const std::string& stored(const std::string& name) const;

 private:
  std::filesystem::path dir_;
  Json config_;
  GenerationConfig generation_;
  std::vector<SafetensorsFile> files_;
  std::map<std::string, size_t> where_;        // tensor name -> index into files_
  std::map<std::string, std::string> stored_;  // text_model view: name -> name in its file
  std::string config_what_;                    // text_model view: where its config comes from
  size_t left_out_ = 0;
  FetchLog* fetch_log_ = nullptr;
  bool copy_views_ = false;
};

// Parses the decoding fields of generation_config.json / config.json.
GenerationConfig read_generation_config(const std::filesystem::path& dir, const Json& config);

}  // namespace lathe
