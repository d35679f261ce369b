// The lab's catalog: which models to test. Rankings per task and view (selected, trending,
// downloads) are data files (data/catalog/*.json, refreshed from the Hub's model listing);
// a sweep runs the entries that can be found on this machine: the tiny checkpoints that
// tests/fixtures/tiny describes, local folders, and models in the Hugging Face cache.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "io/json.h"

namespace lathe {

struct CatalogEntry {
  std::string id;                 // "Qwen/Qwen3-0.6B", or "lathe-tiny/<fixture>"
  std::string revision = "main";  // a Hub revision, "fixture" or "local"
  std::string task = "text-generation";
  std::optional<int64_t> rank;  // position in the view's ranking
  std::string architecture;     // from the listing, when known
  std::optional<int64_t> downloads, likes;
  std::optional<double> trending_score;

  // Where the checkpoint is, when it can be run here (paths are absolute once loaded).
  std::filesystem::path path;       // a checkpoint folder
  std::filesystem::path fixture;    // a tiny fixture folder, built into the sweep's folder
  std::vector<int32_t> prompt_ids;  // the prompt, when the entry fixes one

  // Per-entry limits (0: the sweep's).
  int64_t memory_limit_bytes = 0;
  double timeout_seconds = 0;
  // Self-test faults for the lab's own tests: "hang", "crash" or "oom" in the model's process,
  // or a numerical fault the comparison must catch (NumericFault, tiny fixtures only).
  std::string inject;
};

// The lab's must-fail fixtures (catalog "inject"), each applied to a tiny fixture:
//   "perturb:TENSOR"     the checkpoint's TENSOR scaled by 1.01
//   "config:FIELD*X"     config.json's number FIELD multiplied by X (a wrong norm eps)
//   "config:FIELD+X"     ... or X added to it (an off-by-one rope base)
//   "kv:LAYER"           a cache bug: the values LAYER cached for the prompt's last position
//                        scaled by 1.01 before the decode steps are checked
struct NumericFault {
  enum class Kind : uint8_t { None, Weight, Config, Cache };
  Kind kind = Kind::None;
  std::string target;             // Weight: the tensor; Config: the field
  double factor = 1, offset = 0;  // Config: value * factor + offset
  int64_t layer = 0;              // Cache
};
// Kind::None for an inject that is not a numerical fault; throws lathe::Error on a malformed
// one ("config:" without * or +, a number or layer that does not parse).
NumericFault numeric_fault(const std::string& inject);

struct Catalog {
  std::string task = "text-generation";
  std::string view = "local";  // "selected", "trending", "downloads" or "local"
  std::string snapshot;        // UTC date the ranking was taken, "2026-11-30"
  std::string source;          // where it came from (a URL, "bundled")
  std::vector<CatalogEntry> models;
};

// Reads a catalog file; relative paths are taken from the file's folder. Throws lathe::Error
// naming the file and field on malformed input.
Catalog read_catalog(const std::filesystem::path& file);
Json catalog_to_json(const Catalog& c);
// Writes atomically (temporary file, fsync, rename).
void write_catalog(const Catalog& c, const std::filesystem::path& file);

// The bundled default: every tiny fixture under `fixtures` (with its golden prompt), every
// checkpoint folder given in `local`, and the models of the Hugging Face cache at `hf_hub`
// (HF_HUB_CACHE layout: models--ORG--NAME/snapshots/REV/) when that folder exists.
Catalog default_catalog(const std::filesystem::path& fixtures,
                        const std::vector<std::filesystem::path>& local,
                        const std::optional<std::filesystem::path>& hf_hub);

// Where a ranked entry without a path can be found locally: its snapshot in the Hugging Face
// cache (the revision's, else the newest), else nullopt.
std::optional<std::filesystem::path> find_in_hf_cache(const std::filesystem::path& hf_hub,
                                                      const std::string& id,
                                                      const std::string& revision);

// The Hugging Face hub cache folder this environment uses: $HF_HUB_CACHE, $HF_HOME/hub,
// else ~/.cache/huggingface/hub.
std::filesystem::path default_hf_hub_cache();

// The Hub's public model listing (GET {endpoint}/api/models?pipeline_tag=TASK&sort=KEY&...)
// as a catalog of `view` ("trending" or "downloads"), at most `limit` models.
Catalog fetch_hub_listing(const std::string& endpoint, const std::string& task,
                          const std::string& view, int limit);

}  // namespace lathe
