// `lathe pull`: the files of a Hub model that lathe reads, downloaded into the Hugging Face
// cache (io/hub_cache.h) so that huggingface_hub and transformers find them, and model
// arguments that name a Hub id (docs/hub.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "io/hub_cache.h"

namespace lathe::hub {

struct PullOptions {
  std::filesystem::path cache;       // the Hugging Face cache folder
  std::string endpoint;              // https://huggingface.co or a mirror, no trailing '/'
  std::optional<std::string> token;  // sent to the endpoint's host
  int jobs = 8;                      // parallel downloads
  bool progress = false;             // a progress bar on stderr
};

struct PullResult {
  std::filesystem::path snapshot;  // CACHE/models--ORG--NAME/snapshots/COMMIT
  std::string commit;
  std::vector<std::string> files;  // the files linked into the snapshot
  int64_t bytes_total = 0;         // their size
  int64_t bytes_downloaded = 0;    // what this pull transferred
};

// The model listing (GET ENDPOINT/api/models/ID/revision/REV?blobs=true) gives the commit and
// each file's size, git blob id and LFS sha256. The files lathe reads are taken from it
// (config.json, generation_config.json, model.safetensors or the index and the shards it
// names, tokenizer.json, tokenizer_config.json, special_tokens_map.json, chat_template.jinja,
// chat_template.json, additional_chat_templates/*.jinja); each is downloaded from
// ENDPOINT/ID/resolve/COMMIT/FILE into blobs/BLOB.incomplete (resumed with a Range request
// when a partial file is there), verified (sha256 against the LFS oid, else the git blob
// id and size) and renamed to blobs/BLOB; once all are there, the snapshot's links are made
// and refs/REV is written. Throws lathe::Error with one line naming the URL or file and what
// to do (401/403: the token and the licence; 404: no such model or revision; 5xx: retry).
PullResult pull(const ModelRef& ref, const PullOptions& options);

// What pull() would take, from the model listing alone (nothing is downloaded): the sizes the
// listing gives for the files pull() chooses, and how much of that the cache lacks.
struct PullPlan {
  std::string commit;
  int64_t bytes = 0;          // every file pull() takes
  int64_t weight_bytes = 0;   // the safetensors files among them
  int64_t missing_bytes = 0;  // what a pull would still transfer (blobs not yet in the cache)
  // A sharded checkpoint whose index is not in the cache yet: its shards are taken to be
  // every top-level .safetensors file but consolidated*.safetensors (an upper bound).
  bool weights_estimated = false;
};
// Throws lathe::Error as pull() does (the listing's HTTP errors, no config.json, no weights).
PullPlan plan_pull(const ModelRef& ref, const PullOptions& options);

// How a command's MODEL argument becomes a folder.
struct ResolveOptions {
  bool pull = false;     // download a Hub id the cache lacks
  bool offline = false;  // never touch the network (--offline, HF_HUB_OFFLINE=1)
  std::optional<std::string> token;
  bool progress = false;
};

// An existing path is itself (so is anything not shaped like ORG/NAME[@REV], for the
// command's own "not a directory" error); ORG/NAME[@REV] is its snapshot in the cache
// (refs/REV -> snapshots/COMMIT), pulled first when the cache lacks it and `pull` is set
// and not `offline`; otherwise an Error that names the `lathe pull` command to run.
std::filesystem::path resolve_model(const std::string& arg, const ResolveOptions& options);

}  // namespace lathe::hub
